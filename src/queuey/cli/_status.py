"""``queuey status``: per queue, the rows of each state in a live database and how long the
oldest due one has waited; with ``--queues``, the flow limits of a ``QueueSet``'s queues and
the due rows they hold back now."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from queuey.cli._admin import admin_for
from queuey.cli._options import DATABASE_URL, JSON, SCHEMA
from queuey.cli._root import echo_json, load_attr, main, run_async, wide_console

if TYPE_CHECKING:
    from queuey.queues import QueueConfig

__all__ = ["status_command"]


@main.command("status")
@DATABASE_URL
@SCHEMA
@JSON
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
    from queuey.cli import _rows_view as view

    admin = admin_for(database_url, schema)
    rows = run_async(admin.status())
    limited = _limited_queues(queues_target) if queues_target else []
    held = run_async(admin.held_back(limited)) if limited else []
    if as_json:
        document = view.status_json(rows)
        if queues_target:
            document["limits"] = view.limits_json(limited, held)
        echo_json(document)
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
