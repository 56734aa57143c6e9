"""``queuey failed list|show|retry|discard``: the rows that failed for good (or, with
``--cancelled``, were cancelled), against a live database (safe while workers run)."""

from __future__ import annotations

import functools
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from queuey.cli._admin import admin_for
from queuey.cli._options import DATABASE_URL, JSON, SCHEMA
from queuey.cli._root import EXIT_NOT_FOUND, echo_json, fail, main, run_async

if TYPE_CHECKING:
    from queuey.backends.postgres import Admin, Held, Stopped, Touched

__all__ = ["failed_group"]

_QUEUE = click.option("--queue", help="Only rows of this queue (or topic).")
_CANCELLED = click.option(
    "--cancelled", is_flag=True, help="Cancelled rows instead of failed ones (queuey jobs cancel)."
)


def _stopped(cancelled: bool) -> Stopped:
    return "cancelled" if cancelled else "failed"


@main.group("failed")
def failed_group() -> None:
    """Rows that failed for good (or, with --cancelled, cancelled ones): list, show, retry or
    discard them (safe while workers run)."""


@failed_group.command("list")
@DATABASE_URL
@SCHEMA
@_QUEUE
@_CANCELLED
@click.option(
    "--limit", type=click.IntRange(min=1), default=100, show_default=True, help="At most N rows."
)
@JSON
def failed_list(
    database_url: str | None,
    schema: str,
    queue: str | None,
    cancelled: bool,
    limit: int,
    as_json: bool,
) -> None:
    """Failed rows, oldest failure first, with the first line of their last error. Exits 1
    when there are none.

    \b
    --json prints one object:
      {"failed": [{"id": str, "kind": "job" | "topic", "queue": str,
                   "job_type": str, "attempts": int,
                   "processed_at": ISO 8601 str | null, "error": str}]}
    where error is the first line of the last error ("" when none).
    """
    from queuey.cli import _rows_view as view

    admin = admin_for(database_url, schema)
    status = _stopped(cancelled)
    rows = run_async(admin.failed(queue, limit=limit, status=status))
    where = f" on {queue}" if queue else ""
    if as_json:
        echo_json(view.failed_json(rows))
    elif rows:
        click.echo("\n".join(view.failed_lines(rows, status)))
    if len(rows) == limit:
        click.echo(f"(the first {limit}; pass --limit for more)", err=True)
    if not rows:
        _check_queue(admin, queue, schema)
        fail(f"no {status} rows{where}", EXIT_NOT_FOUND)


@failed_group.command("show")
@click.argument("row_id", metavar="ID", type=click.UUID)
@DATABASE_URL
@SCHEMA
@JSON
def failed_show(row_id: uuid.UUID, database_url: str | None, schema: str, as_json: bool) -> None:
    """One failed (or cancelled) row: payload, attempts, redeliveries, timestamps, the last
    error in full and every failed attempt's error (type, message, traceback, time, worker;
    the latest 10). Exits 1 when there is no such row or it is neither.

    \b
    --json prints every field: id, kind, queue, job_type, status, priority, attempts,
    redeliveries, deferrals, payload, headers, published_by, error (full text or null),
    errors (a list of {attempt, type, message, traceback, at, worker}, oldest first),
    created_at, available_at, processed_at (ISO 8601 or null).
    """
    from queuey.cli import _rows_view as view

    admin = admin_for(database_url, schema)
    row = run_async(admin.show(row_id))
    if row is None:
        fail(f"no row with id {row_id}", EXIT_NOT_FOUND)
    if row.status not in ("failed", "cancelled"):
        fail(
            f"{row.kind} {row_id} on {row.queue} is {row.status}, not failed "
            f"(`queuey jobs show {row_id}` shows a job in any state)",
            EXIT_NOT_FOUND,
        )
    if as_json:
        echo_json(view.detail_json(row))
    else:
        click.echo(view.detail_text(row))


_TARGET = click.argument("row_id", metavar="[ID]", type=click.UUID, required=False)
_ALL = click.option("--all", "every", is_flag=True, help="Every failed row (of --queue if given).")


@dataclass(frozen=True)
class _Selection:
    """What ``retry`` or ``discard`` acts on: row ``row_id`` (``None``: every row, of
    ``queue`` if given) of ``status``, through ``admin`` on ``schema``."""

    admin: Admin
    schema: str
    row_id: uuid.UUID | None
    queue: str | None
    status: Stopped


def _selecting(action: Callable[[_Selection], None]) -> Callable[..., None]:
    """``action`` as a command taking ``[ID]``, ``--all``, ``--queue``, ``--cancelled``,
    ``--database-url`` and ``--schema``, which it receives as one ``_Selection``."""

    @functools.wraps(action)
    def command(
        row_id: uuid.UUID | None,
        every: bool,
        queue: str | None,
        cancelled: bool,
        database_url: str | None,
        schema: str,
    ) -> None:
        _check_target(row_id, every)
        admin = admin_for(database_url, schema)
        action(_Selection(admin, schema, row_id, queue, _stopped(cancelled)))

    options = (_TARGET, _ALL, _QUEUE, _CANCELLED, DATABASE_URL, SCHEMA)
    for option in reversed(options):
        command = option(command)
    return command


@failed_group.command("retry")
@_selecting
def failed_retry(chosen: _Selection) -> None:
    """Put failed row ID (or --all of them; with --cancelled, cancelled ones) back to
    pending: due now, attempts and redeliveries reset to 0, the last error kept. Exits 1 when
    nothing was retried."""
    admin, row_id, queue, status = chosen.admin, chosen.row_id, chosen.queue, chosen.status
    work = (
        admin.retry(row_id, queue=queue, status=status)
        if row_id
        else admin.retry_all(queue=queue, status=status)
    )
    touched = run_async(work)
    held = run_async(admin.held(row_id, queue=queue, status=status))
    for row in held:
        click.echo(_left_alone(row, status), err=not touched)
    if held and not touched:
        sys.exit(EXIT_NOT_FOUND)
    _report(chosen, touched, "retry", "retried")


def _left_alone(row: Held, status: str) -> str:
    """Why a retry left ``row`` alone."""
    if row.never_built:
        if row.holder:
            return (
                f"left {row.id} {status}: job {row.id} is a workflow step that never ran (step "
                f"{row.holder} upstream failed): retry step {row.holder}, and this one waits for "
                "it again"
            )
        return (
            f"left {row.id} {status}: job {row.id} is a workflow step that never ran (cancelled "
            "while waiting): enqueue its workflow again"
        )
    return (
        f"left {row.id} {status}: job {row.holder} ({row.holder_status}) holds its unique "
        "key, and retrying it would run the key twice"
    )


@failed_group.command("discard")
@_selecting
def failed_discard(chosen: _Selection) -> None:
    """Delete failed row ID (or --all of them; with --cancelled, cancelled ones). Exits 1
    when nothing was discarded."""
    admin, row_id, queue, status = chosen.admin, chosen.row_id, chosen.queue, chosen.status
    work = (
        admin.discard(row_id, queue=queue, status=status)
        if row_id
        else admin.discard_all(queue=queue, status=status)
    )
    _report(chosen, run_async(work), "discard", "discarded")


def _check_queue(admin: Admin, queue: str | None, schema: str) -> None:
    """Exit 1 saying so when ``--queue`` names a queue no row is on (a typo, a missing prefix),
    listing the queues that have rows waiting, running or failed."""
    if queue is None or run_async(admin.queue_exists(queue)):
        return
    known = sorted({row.queue for row in run_async(admin.status())})
    listed = f" (queues with live rows: {', '.join(known)})" if known else ""
    fail(
        f"no queue {queue!r} in schema {schema}: no row of any state is on it{listed}",
        EXIT_NOT_FOUND,
    )


def _check_target(row_id: uuid.UUID | None, every: bool) -> None:
    if row_id is None and not every:
        raise click.UsageError("give a failed row's ID or --all")
    if row_id is not None and every:
        raise click.UsageError("give a failed row's ID or --all, not both")


def _report(chosen: _Selection, touched: Sequence[Touched], verb: str, done: str) -> None:
    """Confirm each queue acted on, or say why nothing was and exit 1."""
    from queuey.cli._rows_view import confirmations

    admin, row_id, queue, status = chosen.admin, chosen.row_id, chosen.queue, chosen.status
    if touched:
        for line in confirmations(done, touched, status):
            click.echo(line)
        return
    _check_queue(admin, queue, chosen.schema)
    if row_id is None:
        fail(f"no {status} rows to {verb}{f' on {queue}' if queue else ''}", EXIT_NOT_FOUND)
    row = run_async(admin.show(row_id))
    if row is None:
        fail(f"no row with id {row_id}", EXIT_NOT_FOUND)
    if row.status == "running":
        fail(
            f"{row.kind} {row_id} still runs (its worker holds it): nothing to {verb} until "
            "its run ends (a cancel asked for while it runs takes effect then)",
            EXIT_NOT_FOUND,
        )
    if row.status != status:
        fail(
            f"{row.kind} {row_id} is {row.status}, not {status}: nothing to {verb}"
            + (" (pass --cancelled)" if row.status == "cancelled" else ""),
            EXIT_NOT_FOUND,
        )
    fail(f"{row.kind} {row_id} is on {row.queue}, not {queue}: nothing to {verb}", EXIT_NOT_FOUND)
