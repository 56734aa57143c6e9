"""``queuey workflows list|show|cancel``: the workflows in a live database, one workflow step
by step, and cancelling one (``Admin.workflows``, ``Admin.workflow``, ``Admin.cancel_workflow``);
``queuey workflows batch``: a batch's progress (``Admin.batch``).

A workflow is named by its id (``handle.workflow_id``) or by the job id of any of its steps.
Exit codes: 0 done, 1 nothing found (no workflows, no such workflow, nothing left to cancel),
2 bad usage, 3 the database cannot be reached.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from queuey._terminal import printable
from queuey.cli._admin import admin_for
from queuey.cli._options import DATABASE_URL, JSON, SCHEMA
from queuey.cli._root import EXIT_NOT_FOUND, echo_json, fail, main, run_async

if TYPE_CHECKING:
    from queuey.workflows import WorkflowInfo, WorkflowSummary

__all__ = ["info_json", "show_lines", "summary_json", "summary_line"]

_STATES = ("waiting", "pending", "running", "done", "failed", "cancelled")


@main.group("workflows")
def workflows() -> None:
    """Workflows (PostgreSQL): list them, show one step by step, cancel one."""


def _counts(counts: Any) -> str:
    return ", ".join(f"{state} {counts[state]}" for state in _STATES if counts.get(state))


def _when(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def summary_line(summary: WorkflowSummary) -> str:
    """One line per workflow: id, state, when enqueued (UTC), last step's job name, steps per
    state."""
    return (
        f"{summary.workflow_id}  {summary.state}  {_when(summary.enqueued_at_ms)} UTC  "
        f"{printable(summary.last_step)}  ({_counts(summary.counts)})"
    )


def summary_json(summary: WorkflowSummary) -> dict[str, Any]:
    """The ``list --json`` object of one workflow."""
    return {
        "id": summary.workflow_id,
        "state": summary.state,
        "enqueued_at": datetime.fromtimestamp(summary.enqueued_at_ms / 1000, UTC).isoformat(),
        "last_step": summary.last_step,
        "counts": dict(summary.counts),
    }


def show_lines(info: WorkflowInfo) -> list[str]:
    """The workflow's id and state, then two lines per step (parents first): the step (id,
    job name, queue, state) and its parents and error, indented."""
    lines = [f"workflow {info.workflow_id}  {info.state}  ({_counts(info.counts)})"]
    for step in info.steps:
        lines.append(
            f"{step.job_id}  {printable(step.job_type)}  {printable(step.queue)}  {step.state}"
        )
        parents = ", ".join(step.parents) or "none (a first step)"
        error = f"  error: {printable(step.error)}" if step.error else ""
        lines.append(f"    after: {parents}{error}")
    return lines


def info_json(info: WorkflowInfo) -> dict[str, Any]:
    """The ``show --json`` document."""
    return {
        "id": info.workflow_id,
        "state": info.state,
        "counts": info.counts,
        "steps": [
            {
                "id": step.job_id,
                "job_type": step.job_type,
                "queue": step.queue,
                "state": step.state,
                "parents": list(step.parents),
                "error": step.error,
            }
            for step in info.steps
        ],
    }


@workflows.command("list")
@DATABASE_URL
@SCHEMA
@click.option(
    "--limit", type=click.IntRange(min=1), default=50, show_default=True, help="At most N."
)
@JSON
def list_command(database_url: str | None, schema: str, limit: int, as_json: bool) -> None:
    """The most recently enqueued workflows, newest first: id, state (running while a step is
    pending, running or waiting; then done, failed or cancelled), when enqueued, the job name
    of its last step and its steps per state. Exits 1 when there are none.

    \b
    --json prints one object:
      {"workflows": [{"id": str, "state": str, "enqueued_at": ISO 8601 str,
                      "last_step": str, "counts": {state: int}}]}
    """
    admin = admin_for(database_url, schema)
    found = run_async(admin.workflows(limit))
    if as_json:
        echo_json({"workflows": [summary_json(s) for s in found]})
    elif found:
        click.echo("\n".join(summary_line(s) for s in found))
    if not found:
        fail("no workflows", EXIT_NOT_FOUND)


@workflows.command("show")
@click.argument("workflow_id", metavar="ID", type=click.UUID)
@DATABASE_URL
@SCHEMA
@JSON
def show_command(
    workflow_id: uuid.UUID, database_url: str | None, schema: str, as_json: bool
) -> None:
    """Workflow ID (or the workflow of the step with job id ID) step by step, parents first:
    each step's job id, job name, queue, state, the steps it is built from and its last error.
    Exits 1 when there is no such workflow.

    \b
    --json prints one object:
      {"id": str, "state": str, "counts": {state: int},
       "steps": [{"id": str, "job_type": str, "queue": str, "state": str,
                  "parents": [str], "error": str | null}]}
    """
    admin = admin_for(database_url, schema)
    info = run_async(admin.workflow(workflow_id))
    if info is None:
        fail(f"no workflow (nor step) with id {workflow_id}", EXIT_NOT_FOUND)
    if as_json:
        echo_json(info_json(info))
    else:
        click.echo("\n".join(show_lines(info)))


@workflows.command("cancel")
@click.argument("workflow_id", metavar="ID", type=click.UUID)
@DATABASE_URL
@SCHEMA
def cancel_command(workflow_id: uuid.UUID, database_url: str | None, schema: str) -> None:
    """Cancel workflow ID (or the workflow of the step with job id ID): its pending and
    waiting steps end cancelled at once; each running step's worker is told to stop it (as
    `queuey jobs cancel` does), and it ends cancelled when its run does. Steps that ended stay
    as they are. Exits 1 when no step of it was pending, waiting or running."""
    admin = admin_for(database_url, schema)
    done = run_async(admin.cancel_workflow(workflow_id))
    if not done.cancelled and not done.requested:
        fail(f"no pending, waiting or running step in workflow {workflow_id}", EXIT_NOT_FOUND)
    told = f"; {done.requested} running step(s) told to stop" if done.requested else ""
    click.echo(f"cancelled {done.cancelled} step(s) of workflow {workflow_id}{told}")


@workflows.command("batch")
@click.argument("batch_id", metavar="ID", type=click.UUID)
@DATABASE_URL
@SCHEMA
@JSON
def batch_command(
    batch_id: uuid.UUID, database_url: str | None, schema: str, as_json: bool
) -> None:
    """Batch ID's progress (a batch of jobs, ``producer.enqueue_batch``): members in all,
    succeeded, failed (or cancelled), not ended yet, and whether it has ended (its callbacks
    were released). Exits 1 when there is no such batch.

    \b
    --json prints one object:
      {"id": str, "total": int, "done": int, "failed": int, "pending": int, "ended": bool}
    """
    admin = admin_for(database_url, schema)
    found = run_async(admin.batch(batch_id))
    if found is None:
        fail(f"no batch with id {batch_id}", EXIT_NOT_FOUND)
    if as_json:
        document = found.model_dump(exclude={"batch_id"})
        echo_json({"id": found.batch_id, **document, "ended": found.ended})
        return
    state = "ended" if found.ended else "running"
    click.echo(
        f"batch {found.batch_id}  {state}  total {found.total}, done {found.done}, "
        f"failed {found.failed}, pending {found.pending}"
    )
