"""Operating on running workflows (``queuey.workflows``): list them, show one step by step,
cancel one. PostgreSQL and memory implement ``WorkflowOps``; ``Producer.workflow``,
``Producer.workflows`` and ``Producer.cancel_workflow`` call it, ``Admin`` offers the same on
a database URL (``queuey workflows list|show|cancel``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from queuey.backends.base import JobState
from queuey.backends.steps import ADDED_BY_HEADER

__all__ = [
    "DashboardWorkflowStore",
    "WorkflowCancel",
    "WorkflowInfo",
    "WorkflowOps",
    "WorkflowStep",
    "WorkflowSummary",
    "step_parents",
]


@dataclass(frozen=True)
class WorkflowStep:
    """One step of a workflow as it stands.

    Attributes:
        job_id: the step's job id.
        job_type: its job name.
        queue: its queue.
        state: where it is (``waiting`` until its parents have all ended).
        parents: the job ids of the steps it is built from, in input order (empty: a root).
        error: its last error (a step failed because an upstream one did names that one).
    """

    job_id: str
    job_type: str
    queue: str
    state: JobState
    parents: tuple[str, ...]
    error: str | None


@dataclass(frozen=True)
class WorkflowInfo:
    """A workflow and each of its steps, in the order they were enqueued (parents first)."""

    workflow_id: str
    steps: tuple[WorkflowStep, ...]

    @property
    def counts(self) -> dict[str, int]:
        """How many steps are in each state (only states some step is in)."""
        found: dict[str, int] = {}
        for step in self.steps:
            found[step.state] = found.get(step.state, 0) + 1
        return found

    @property
    def state(self) -> str:
        """The workflow's state: ``running`` while a step is pending, running or waiting, then
        ``done`` when every step is done, else ``failed`` or ``cancelled`` (a cancelled step
        and no failed one)."""
        return workflow_state(self.counts)


@dataclass(frozen=True)
class WorkflowSummary:
    """One workflow in a list: its id, the job name of its last step, when it was enqueued
    (epoch milliseconds), its state (as ``WorkflowInfo.state``) and its steps per state."""

    workflow_id: str
    last_step: str
    enqueued_at_ms: int
    state: str
    counts: Mapping[str, int]


@dataclass(frozen=True)
class WorkflowCancel:
    """What cancelling a workflow did: ``cancelled`` steps ended cancelled (pending or
    waiting), ``requested`` running steps were told to stop (each ends cancelled when its run
    does). Both 0: no step of that workflow was still to run (or no such workflow)."""

    cancelled: int
    requested: int


def workflow_state(counts: Mapping[str, int]) -> str:
    """The workflow state of steps counted per state ``counts`` (see ``WorkflowInfo.state``)."""
    if any(counts.get(s) for s in ("pending", "running", "waiting")):
        return "running"
    if counts.get("failed"):
        return "failed"
    if counts.get("cancelled"):
        return "cancelled"
    return "done"


def step_parents(step: Any, headers: Any = None) -> tuple[str, ...]:
    """The parents a stored step names (its ``step`` column or record), in input order; for a
    job a step fanned out to, that step (its ``queuey-added-by`` header)."""
    if isinstance(step, dict):
        parents = step.get("parents")
        if isinstance(parents, list):
            return tuple(str(p) for p in parents)
    added_by = headers.get(ADDED_BY_HEADER) if isinstance(headers, dict) else None
    return (str(added_by),) if added_by else ()


@runtime_checkable
class WorkflowOps(Protocol):
    """A backend whose workflows can be listed, shown and cancelled (PostgreSQL, memory)."""

    async def workflow(self, workflow_id: str) -> WorkflowInfo | None:
        """Workflow ``workflow_id`` (or the workflow of the step whose job id that is), step by
        step; ``None`` when there is none.

        Raises:
            ConfigError: (PostgreSQL) the id is not a UUID.
            BackendError: the backend could not be asked.
        """
        ...

    async def workflows(self, limit: int = 50) -> list[WorkflowSummary]:
        """The ``limit`` most recently enqueued workflows, newest first.

        Raises:
            BackendError: the backend could not be asked.
        """
        ...

    async def cancel_workflow(self, workflow_id: str) -> WorkflowCancel:
        """Cancel workflow ``workflow_id`` (or that of the step with that job id): its pending
        and waiting steps end ``cancelled`` at once, each running one is told to stop (as
        ``cancel`` tells it) and ends ``cancelled`` when its run does. Steps that ended stay
        as they are.

        Raises:
            ConfigError: (PostgreSQL) the id is not a UUID.
            BackendError: the backend failed; nothing changed.
        """
        ...


class DashboardWorkflowStore(Protocol):
    """What the dashboard's workflow page reads and does (part of ``DashboardStore``)."""

    async def workflow(self, job_id: str) -> WorkflowInfo | None:
        """The workflow of job ``job_id`` (or the workflow with that id) step by step; ``None``
        when there is none."""
        ...

    async def workflow_of(self, job_id: str) -> str | None:
        """The id of the workflow job ``job_id`` is a step of; ``None`` when none."""
        ...

    async def cancel_workflow(self, actor: str, workflow_id: str) -> WorkflowCancel:
        """Cancel workflow ``workflow_id`` as ``queuey workflows cancel`` does; audited as
        ``actor``'s."""
        ...
