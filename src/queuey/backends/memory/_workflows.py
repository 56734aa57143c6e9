"""Listing, showing and cancelling workflows in memory (``WorkflowOps``), with the semantics of
PostgreSQL's statements: the steps as each stands, and a cancel that ends the pending and
waiting steps at once and tells the running ones."""

from __future__ import annotations

from queuey._validation import check_int
from queuey.backends.memory._store import Store
from queuey.backends.steps import StepRow
from queuey.backends.workflow_ops import (
    WorkflowCancel,
    WorkflowInfo,
    WorkflowStep,
    WorkflowSummary,
    step_parents,
)

__all__ = ["MemoryWorkflowOps"]


class MemoryWorkflowOps:
    """``WorkflowOps`` for ``MemoryBackend`` over its store."""

    _store: Store

    def _rows(self, workflow_id: str) -> tuple[str, list[StepRow]] | None:
        """The workflow of ``workflow_id`` (or of the step with that job id) and its steps."""
        steps = self._store.steps
        found = workflow_id if workflow_id in steps.flows else steps.flow_of.get(workflow_id)
        return None if found is None else (found, steps.flows[found])

    def _step(self, row: StepRow) -> WorkflowStep:
        record = self._store.jobs[row.job_id]
        parents = step_parents(row.step, row.headers)
        return WorkflowStep(
            row.job_id, row.job_type, row.queue, record.state, parents, record.last_error
        )

    async def workflow(self, workflow_id: str) -> WorkflowInfo | None:
        """Workflow ``workflow_id`` (or that of the step with that job id), step by step;
        ``None`` when this backend never saw it (``WorkflowOps``)."""
        found = self._rows(workflow_id)
        if found is None:
            return None
        return WorkflowInfo(found[0], tuple(self._step(row) for row in found[1]))

    async def workflows(self, limit: int = 50) -> list[WorkflowSummary]:
        """The ``limit`` most recently enqueued workflows, newest first (``WorkflowOps``).

        Raises:
            ConfigError: ``limit`` is not a whole number from 1.
        """
        check_int(limit, "limit", low=1)
        summaries = []
        for workflow_id, rows in reversed(self._store.steps.flows.items()):
            info = WorkflowInfo(workflow_id, tuple(self._step(row) for row in rows))
            first = min(row.enqueued_at_ms for row in rows)
            summaries.append(
                WorkflowSummary(workflow_id, rows[-1].job_type, first, info.state, info.counts)
            )
            if len(summaries) == limit:
                break
        return summaries

    async def cancel_workflow(self, workflow_id: str) -> WorkflowCancel:
        """Cancel workflow ``workflow_id`` (or that of the step with that job id): its waiting
        steps first (so no end reaches them), then its pending ones, end cancelled; each
        running one has its cancel requested and ends cancelled when its handler stops
        (``WorkflowOps``).

        Raises:
            ShutDownError: the backend is closed.
        """
        self._store.check_open()
        found = self._rows(workflow_id)
        rows = [] if found is None else found[1]
        waiting = [row for row in rows if self._store.jobs[row.job_id].state == "waiting"]
        for row in waiting:  # all withdrawn first: ending one then reaches none of them
            self._store.steps.withdraw(row.job_id)
        for row in waiting:
            envelope = self._store.jobs[row.job_id].envelope
            self._store.track(envelope, "cancelled", ran=False, error="workflow cancelled")
        cancelled, requested = len(waiting), 0
        for row in rows:
            if self._store.jobs[row.job_id].state in ("pending", "running"):
                if self._store.cancel(row.job_id) == "cancelled":
                    cancelled += 1
                else:
                    requested += 1
        return WorkflowCancel(cancelled, requested)
