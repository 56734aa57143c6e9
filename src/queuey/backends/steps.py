"""What a backend stores to start a workflow (``queuey.workflows``): its steps and the edges
between them, as plain rows.

A step with no parents is due at once; every other step waits until each of its parents has
ended, then is due with its parents' results (or errors) as its inputs, in edge position order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from queuey.errors import NotSupportedError

__all__ = [
    "ADDED_BY_HEADER",
    "FAN_OUT_KEY",
    "FAN_OUT_PREFIX",
    "WORKFLOW_HEADER",
    "FailurePolicy",
    "StepEdge",
    "StepRow",
    "SyncWorkflowBackend",
    "WorkflowBackend",
    "fans_out",
    "workflows_refused",
]

FAN_OUT_KEY = "__queuey_fan_out__"
"""The key of a fan-out result (``queuey.fan_out.FanOut``): a list of ``{"id", "job_type",
"queue", "payload", "at"}`` (``at``: epoch milliseconds), the jobs the completing step adds to
its workflow. The statement (or step) that records the result inserts them, due now, and
rewires each step after the completing one to wait for them instead, their results in order in
place of its own."""

WORKFLOW_HEADER = "queuey-workflow"
"""The envelope header naming the workflow a step belongs to (its id): a step's run is traced
with it (``queuey.workflow.id``) and counted in ``queuey_workflow_steps_total``."""

FAN_OUT_PREFIX = '{"' + FAN_OUT_KEY + '":'
"""How the JSON text of a fan-out result begins (as ``FanOut`` writes it)."""


def fans_out(results: Sequence[str | None]) -> bool:
    """Whether one of ``results`` (JSON texts) is a fan-out result."""
    return any(r is not None and r.startswith(FAN_OUT_PREFIX) for r in results)


ADDED_BY_HEADER = "queuey-added-by"
"""The envelope header of a job a step fanned out to (``FAN_OUT_KEY``): that step's job id, its
parent in the workflow's graph (``queuey workflows show``, the dashboard)."""

FailurePolicy = Literal["fail", "partial"]
"""What a failed parent does to its child: ``fail`` fails the whole workflow (every step still
waiting ends failed); ``partial`` gives the child the parent's error in place of its result."""


@dataclass(frozen=True)
class StepRow:
    """One step of a workflow.

    Attributes:
        job_id: the step's job id (a UUID string), known before it runs.
        queue: its resolved queue name.
        job_type: its job name.
        priority: its priority.
        payload: its job's JSON fields (a root), or ``{}`` (a step built from its inputs).
        enqueued_at_ms: the producer's epoch milliseconds.
        parents: how many parents it waits for (0: a root).
        step: how its job is built from its inputs (``{"builder": name, "many": bool,
            "parents": [job ids]}``), or ``None`` for a root.
        headers: its envelope's headers: the workflow's id (``WORKFLOW_HEADER``) and, when
            the producer traces, the workflow's trace context, so every step runs in one trace.
    """

    job_id: str
    queue: str
    job_type: str
    priority: int
    payload: Any
    enqueued_at_ms: int
    parents: int
    step: dict[str, Any] | None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StepEdge:
    """``parent``'s end feeds ``child``'s input at ``position`` under ``policy``."""

    parent: str
    child: str
    position: int
    policy: FailurePolicy


@runtime_checkable
class WorkflowBackend(Protocol):
    """A backend that runs workflows durably (PostgreSQL)."""

    async def start_workflow(
        self, workflow_id: str, steps: Sequence[StepRow], edges: Sequence[StepEdge]
    ) -> None:
        """Store every step and edge of workflow ``workflow_id`` at once (all or nothing);
        the roots are due now.

        Raises:
            BackendError: nothing was stored.
        """
        ...


@runtime_checkable
class SyncWorkflowBackend(Protocol):
    """A synchronous backend that can start workflows (``ThreadedBackend`` over a
    ``WorkflowBackend``)."""

    def start_workflow(
        self, workflow_id: str, steps: Sequence[StepRow], edges: Sequence[StepEdge]
    ) -> None:
        """As ``WorkflowBackend.start_workflow``, blocking.

        Raises:
            NotSupportedError: the backend underneath cannot run workflows; nothing stored.
            BackendError: nothing was stored.
        """
        ...


def workflows_refused(backend: object) -> NotSupportedError:
    """The error for ``backend``, which cannot run workflows."""
    return NotSupportedError(
        f"{type(backend).__name__} cannot run workflows: a step's completion and the release "
        "of the next steps must commit together; use PostgreSQL or memory (a synchronous "
        "caller: ThreadedBackend over either)"
    )
