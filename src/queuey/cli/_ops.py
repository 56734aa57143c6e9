"""Operations commands against a live database: ``queuey status`` and
``queuey failed list|show|retry|discard``."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from queuey.cli._options import DATABASE_URL, SCHEMA
from queuey.cli._root import (
    EXIT_NOT_FOUND,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    echo_json,
    fail,
    load_attr,
    main,
    one_line,
    require,
    wide_console,
)
from queuey.errors import BackendError, QueueyError

if TYPE_CHECKING:
    from queuey.backends.postgres import Admin, Held, Stopped, Touched
    from queuey.queues import QueueConfig


# -- operations: queuey status, queuey failed list|show|retry|discard --------------------------

_T = TypeVar("_T")
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON (shape in this help).")
_QUEUE = click.option("--queue", help="Only rows of this queue (or topic).")
_CANCELLED = click.option(
    "--cancelled", is_flag=True, help="Cancelled rows instead of failed ones (queuey jobs cancel)."
)


def _stopped(cancelled: bool) -> Stopped:
    return "cancelled" if cancelled else "failed"


def _admin(database_url: str | None, schema: str) -> Admin:
    """An ``Admin`` for the URL and schema, or a usage error (exit 2) naming what is wrong."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    from queuey.backends.postgres import Admin, redact

    url = require(database_url, "database url", "QUEUEY_DATABASE_URL")
    try:
        conninfo_to_dict(url)
    except ProgrammingError as exc:
        raise click.UsageError(f"malformed database url: {one_line(redact(str(exc)))}") from None
    try:
        return Admin(url, schema=schema)
    except QueueyError as exc:
        raise click.UsageError(str(exc)) from None


def _operate(work: Coroutine[Any, Any, _T]) -> _T:
    """Run one operation: exit 3 when the database cannot be reached (or refuses the query), 2
    on any other queuey error (a missing or old schema), each with one line on stderr."""
    try:
        return asyncio.run(work)
    except BackendError as exc:
        fail(str(exc), EXIT_UNREACHABLE)
    except QueueyError as exc:
        fail(str(exc), EXIT_USAGE)


def _echo_json(document: object) -> None:
    echo_json(document)


@main.command("status")
@DATABASE_URL
@SCHEMA
@_JSON
@click.option(
    "--queues",
    "queues_target",
    metavar="MODULE:ATTR",
    help="Your QueueSet: also show its queues' flow limits and the due rows they hold back now.",
)
def status_command(
    database_url: str | None, schema: str, as_json: bool, queues_target: str | None
) -> None:
    """Per queue: rows due now (pending), delayed or waiting for a retry (scheduled), running,
    failed, and workflow steps whose parents have not ended (waiting), and how long the oldest
    due row has waited (database clock). Queues holding only done rows are not listed. Exits 0
    even when nothing is listed.

    \b
    --json prints one object:
      {"queues": [{"kind": "job" | "topic", "queue": str, "pending": int,
                   "scheduled": int, "running": int, "failed": int, "waiting": int,
                   "oldest_pending_secs": float | null}]}
    ordered by kind, then queue; oldest_pending_secs is null when nothing is due.
    With --queues, "limits" too, one per queue of the set with flow limits:
      [{"kind": str, "queue": str, "limits": [str], "held_concurrency": int,
        "held_rate": int}]
    held_*: due rows a limit of that kind holds back now, as a claim counts them (among
    the queue's oldest 200 due rows; a row held by both kinds counts in both).
    """
    from queuey.cli import _ops_view as view

    admin = _admin(database_url, schema)
    rows = _operate(admin.status())
    limited = _limited_queues(queues_target) if queues_target else []
    held = _operate(admin.held_back(limited)) if limited else []
    if as_json:
        document = view.status_json(rows)
        if queues_target:
            document["limits"] = view.limits_json(limited, held)
        _echo_json(document)
        return
    if rows:
        wide_console().print(view.status_table(rows, f"queuey status (schema {schema})"))
    else:
        click.echo(f"no pending, running, failed or waiting rows in schema {schema}")
    if limited:
        wide_console().print(view.limits_table(limited, held))
    elif queues_target:
        click.echo(f"no queue of {queues_target} has flow limits")


def _limited_queues(target: str) -> list[QueueConfig]:
    """The queues of QueueSet ``target`` with flow limits (their job types' included)."""
    from dataclasses import replace

    from queuey.queues import QueueSet
    from queuey.worker import declared_limits

    queue_set = load_attr(target)
    if not (isinstance(queue_set, type) and issubclass(queue_set, QueueSet)):
        raise click.UsageError(f"--queues {target}: expected a QueueSet class")
    configs = []
    for queue in queue_set.all():
        limits = queue.config.limits + declared_limits(queue_set, queue.config.name)
        if limits:
            configs.append(replace(queue.config, limits=limits))
    return configs


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
@_JSON
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
    from queuey.cli import _ops_view as view

    admin = _admin(database_url, schema)
    status = _stopped(cancelled)
    rows = _operate(admin.failed(queue, limit=limit, status=status))
    where = f" on {queue}" if queue else ""
    if as_json:
        _echo_json(view.failed_json(rows))
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
@_JSON
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
    from queuey.cli import _ops_view as view

    admin = _admin(database_url, schema)
    row = _operate(admin.show(row_id))
    if row is None:
        fail(f"no row with id {row_id}", EXIT_NOT_FOUND)
    if row.status not in ("failed", "cancelled"):
        fail(
            f"{row.kind} {row_id} on {row.queue} is {row.status}, not failed "
            f"(`queuey jobs show {row_id}` shows a job in any state)",
            EXIT_NOT_FOUND,
        )
    if as_json:
        _echo_json(view.detail_json(row))
    else:
        click.echo(view.detail_text(row))


_TARGET = click.argument("row_id", metavar="[ID]", type=click.UUID, required=False)
_ALL = click.option("--all", "every", is_flag=True, help="Every failed row (of --queue if given).")


@failed_group.command("retry")
@_TARGET
@_ALL
@_QUEUE
@_CANCELLED
@DATABASE_URL
@SCHEMA
def failed_retry(
    row_id: uuid.UUID | None,
    every: bool,
    queue: str | None,
    cancelled: bool,
    database_url: str | None,
    schema: str,
) -> None:
    """Put failed row ID (or --all of them; with --cancelled, cancelled ones) back to
    pending: due now, attempts and redeliveries reset to 0, the last error kept. Exits 1 when
    nothing was retried."""
    _check_target(row_id, every)
    admin, status = _admin(database_url, schema), _stopped(cancelled)
    work = (
        admin.retry(row_id, queue=queue, status=status)
        if row_id
        else admin.retry_all(queue=queue, status=status)
    )
    touched = _operate(work)
    held = _operate(admin.held(row_id, queue=queue, status=status))
    for row in held:
        click.echo(_left_alone(row, status), err=not touched)
    if held and not touched:
        sys.exit(EXIT_NOT_FOUND)
    _report(admin, touched, "retry", "retried", row_id, queue, schema, status)


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
@_TARGET
@_ALL
@_QUEUE
@_CANCELLED
@DATABASE_URL
@SCHEMA
def failed_discard(
    row_id: uuid.UUID | None,
    every: bool,
    queue: str | None,
    cancelled: bool,
    database_url: str | None,
    schema: str,
) -> None:
    """Delete failed row ID (or --all of them; with --cancelled, cancelled ones). Exits 1
    when nothing was discarded."""
    _check_target(row_id, every)
    admin, status = _admin(database_url, schema), _stopped(cancelled)
    work = (
        admin.discard(row_id, queue=queue, status=status)
        if row_id
        else admin.discard_all(queue=queue, status=status)
    )
    _report(admin, _operate(work), "discard", "discarded", row_id, queue, schema, status)


def _check_queue(admin: Admin, queue: str | None, schema: str) -> None:
    """Exit 1 saying so when ``--queue`` names a queue no row is on (a typo, a missing prefix),
    listing the queues that have rows waiting, running or failed."""
    if queue is None or _operate(admin.queue_exists(queue)):
        return
    known = sorted({row.queue for row in _operate(admin.status())})
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


def _report(
    admin: Admin,
    touched: Sequence[Touched],
    verb: str,
    done: str,
    row_id: uuid.UUID | None,
    queue: str | None,
    schema: str,
    status: Stopped = "failed",
) -> None:
    """Confirm each queue acted on, or say why nothing was and exit 1."""
    from queuey.cli._ops_view import confirmations

    if touched:
        for line in confirmations(done, touched, status):
            click.echo(line)
        return
    _check_queue(admin, queue, schema)
    if row_id is None:
        fail(f"no {status} rows to {verb}{f' on {queue}' if queue else ''}", EXIT_NOT_FOUND)
    row = _operate(admin.show(row_id))
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
