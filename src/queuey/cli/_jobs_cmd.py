"""``queuey jobs cancel ID``: cancel one job on PostgreSQL (``Admin.cancel``)."""

from __future__ import annotations

import uuid

import click

from queuey.cli._jobs_group import jobs
from queuey.cli._ops import _admin, _operate
from queuey.cli._options import DATABASE_URL, SCHEMA
from queuey.cli._root import EXIT_NOT_FOUND, fail

__all__ = ["cancel_command"]


@jobs.command("cancel")
@click.argument("job_id", metavar="ID", type=click.UUID)
@DATABASE_URL
@SCHEMA
def cancel_command(job_id: uuid.UUID, database_url: str | None, schema: str) -> None:
    """Cancel job ID. A pending or scheduled job becomes cancelled and never runs. A running
    one is asked to stop: its worker is told (its handler sees ctx.cancelled, and an async one
    is stopped after the worker's cancel grace); it stays running, held by that worker, until
    its run ends, then it is cancelled (not retried, any other outcome refused). A plain (def)
    handler that ignores ctx.cancelled runs to its end first. A cancelled job is listed,
    retried or discarded with `queuey failed list|retry|discard --cancelled`. Exits 1 when no
    pending, scheduled or running job has that id."""
    admin = _admin(database_url, schema)
    result = _operate(admin.cancel(job_id))
    if result == "cancelled":
        click.echo(f"cancelled job {job_id}")
    elif result == "requested":
        click.echo(
            f"job {job_id} is running: its worker was told to stop it; it stays running until "
            "its run ends, then it is cancelled"
        )
    else:
        fail(f"no pending, scheduled or running job with id {job_id}", EXIT_NOT_FOUND)
