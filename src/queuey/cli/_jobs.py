"""``queuey jobs show|cancel ID``: one job (or topic message) by the id ``enqueue`` returned,
on PostgreSQL.

``show`` says where it is, whatever its state (pending, scheduled, running, done or failed):
its state, attempts, due time, last error, every failed attempt's error (type, message,
traceback, time, worker) and payload, as text or JSON; times are shown in UTC. ``cancel``
cancels it (``Admin.cancel``)."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import click

from queuey._terminal import printable_json
from queuey.backends.base import JobInfo
from queuey.cli._admin import admin_for
from queuey.cli._attempts_view import errors_json, errors_text
from queuey.cli._options import DATABASE_URL, JSON, SCHEMA
from queuey.cli._root import EXIT_NOT_FOUND, echo_json, fail, main, run_async
from queuey.cli._rows_view import format_age, labelled

__all__ = ["cancel_command", "job_json", "job_text", "jobs", "show"]


@main.group("jobs")
def jobs() -> None:
    """One job (or topic message) by its id (PostgreSQL): show or cancel it."""


def job_json(job: JobInfo) -> dict[str, Any]:
    """The ``jobs show --json`` document (shape in the command's help)."""
    return {
        "id": job.id,
        "kind": job.kind,
        "queue": job.queue,
        "job_type": job.job_type,
        "state": job.state,
        "attempts": job.attempts,
        "redeliveries": job.redeliveries,
        "deferrals": job.deferrals,
        "priority": job.priority,
        "due_at": job.due_at.astimezone(UTC).isoformat(),
        "last_error": job.last_error,
        "errors": errors_json(job.errors),
        "payload": job.payload,
        "progress": None if job.progress is None else asdict(job.progress),
        "result": job.result,
        "cancel_requested": job.cancel_requested,
    }


def _state(job: JobInfo, now: datetime) -> str:
    """The state, saying when a pending job is due ("pending, scheduled: due in 4m 05s") and
    when a running one's cancel was asked for."""
    if job.cancel_requested:
        return f"{job.state}, cancel requested: it ends cancelled when its run ends"
    if job.state != "pending":
        return job.state
    wait = (job.due_at - now).total_seconds()
    if wait > 0:
        return f"pending, scheduled: due in {format_age(wait)}"
    return f"pending, due for {format_age(-wait)}"


def job_text(job: JobInfo, now: datetime | None = None) -> str:
    """Labelled fields (with the last progress reported, if any), then the payload (and a done
    job's result) as indented JSON, the last error in full, and each failed attempt's error
    with its traceback."""
    fields = [
        ("id", job.id),
        ("kind", job.kind),
        ("queue" if job.kind == "job" else "topic", job.queue),
        ("job type" if job.kind == "job" else "subscriber", job.job_type),
        ("state", _state(job, now or datetime.now(UTC))),
        ("attempts", str(job.attempts)),
        ("redeliveries", str(job.redeliveries)),
        ("deferrals", str(job.deferrals)),
        ("priority", str(job.priority)),
        ("due at", job.due_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")),
    ]
    if job.progress is not None:
        fields.append(("progress", str(job.progress)))
    text = labelled(fields, job.payload, job.last_error, errors_text(job.errors))
    if job.result is None:
        return text
    result = printable_json(json.dumps(job.result, indent=2, ensure_ascii=False))
    head, _, tail = text.partition("\n\nlast error:")
    return f"{head}\n\nresult:\n{result}\n\nlast error:{tail}"


@jobs.command("show")
@click.argument("job_id", metavar="ID", type=click.UUID)
@DATABASE_URL
@SCHEMA
@JSON
def show(job_id: uuid.UUID, database_url: str | None, schema: str, as_json: bool) -> None:
    """One job (or topic message) by ID, whatever its state: pending (due now or scheduled),
    running, done or failed, with its attempts, due time, last error, every failed attempt's
    error (type, message, traceback, time, worker; the latest 10) and payload. Exits 1
    when there is no such job (done jobs are deleted after the backend's `retain`, 24 h by
    default).

    \b
    --json prints one object:
      {"id": str, "kind": "job" | "topic", "queue": str, "job_type": str,
       "state": "pending" | "running" | "done" | "failed" | "cancelled", "attempts": int,
       "redeliveries": int, "deferrals": int, "priority": int,
       "due_at": ISO 8601 str (UTC), "last_error": str | null,
       "errors": [{"attempt": int, "type": str | null, "message": str,
                   "traceback": str | null, "at": ISO 8601 str, "worker": str}],
       "payload": any,
       "progress": {"fraction": float, "done": int | null, "total": int | null,
                    "note": str | null} | null, "result": any,
       "cancel_requested": bool}
    where due_at is when a pending job may run next (later than now: scheduled),
    progress is the last its handler reported (ctx.progress) and result a done job's
    stored result (null when its job type declares none), and cancel_requested is true
    for a running job whose cancel was asked for (it ends cancelled when its run ends).
    """
    job = run_async(admin_for(database_url, schema).job(job_id))
    if job is None:
        fail(f"no job with id {job_id} in schema {schema}", EXIT_NOT_FOUND)
    if as_json:
        echo_json(job_json(job))
    else:
        click.echo(job_text(job))


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
    result = run_async(admin_for(database_url, schema).cancel(job_id))
    if result == "cancelled":
        click.echo(f"cancelled job {job_id}")
    elif result == "requested":
        click.echo(
            f"job {job_id} is running: its worker was told to stop it; it stays running until "
            "its run ends, then it is cancelled"
        )
    else:
        fail(f"no pending, scheduled or running job with id {job_id}", EXIT_NOT_FOUND)
