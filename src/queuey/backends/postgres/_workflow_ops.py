"""Listing, showing and cancelling workflows on PostgreSQL (``WorkflowOps``): the statements
``workflow_steps``, ``workflow_list`` and ``cancel_workflow`` run through a store, shared by
``PostgresBackend`` (``WorkflowOpsMixin``) and ``Admin``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg.rows import dict_row, tuple_row

from queuey._validation import check_int
from queuey.backends.base import JobState
from queuey.backends.postgres._ids import parse_id
from queuey.backends.postgres._store import Store
from queuey.backends.workflow_ops import (
    WorkflowCancel,
    WorkflowInfo,
    WorkflowStep,
    WorkflowSummary,
    step_parents,
    workflow_state,
)

__all__ = ["WorkflowOpsMixin", "cancel_workflow", "workflow_info", "workflow_list"]


async def workflow_info(store: Store, workflow_id: str) -> WorkflowInfo | None:
    """``workflow_steps`` as a ``WorkflowInfo``; ``None`` when no step has that workflow.

    Raises:
        ConfigError: ``workflow_id`` is not a UUID.
    """
    params = {"id": parse_id(workflow_id)}
    rows = await store._fetch("workflow_steps", params, dict_row)
    if not rows:
        return None
    steps = tuple(_step(row) for row in rows)
    return WorkflowInfo(str(rows[0]["workflow"]), steps)


def _step(row: dict[str, Any]) -> WorkflowStep:
    state: JobState = row["status"]
    parents = step_parents(row["step"])
    return WorkflowStep(row["id"], row["job_type"], row["queue"], state, parents, row["error"])


async def workflow_list(store: Store, limit: int) -> list[WorkflowSummary]:
    """``workflow_list``: the ``limit`` newest workflows.

    Raises:
        ConfigError: ``limit`` is not a whole number from 1.
    """
    params = {"limit": check_int(limit, "limit", low=1)}
    rows = await store._fetch("workflow_list", params, dict_row)
    return [
        WorkflowSummary(
            row["workflow"],
            row["last_step"],
            int(row["enqueued_at_ms"]),
            workflow_state(row["counts"]),
            dict(row["counts"]),
        )
        for row in rows
    ]


async def cancel_workflow(store: Store, workflow_id: str, channel: str) -> WorkflowCancel:
    """``cancel_workflow``, running steps told on ``channel`` (the cancel channel).

    Raises:
        ConfigError: ``workflow_id`` is not a UUID.
    """
    params = {"id": parse_id(workflow_id), "channel": channel}
    rows = await store._fetch("cancel_workflow", params, tuple_row)
    cancelled, requested = rows[0] if rows else (0, 0)
    return WorkflowCancel(int(cancelled), int(requested))


class WorkflowOpsMixin:
    """``WorkflowOps`` for ``PostgresBackend``: its store, open check and cancel channel."""

    _store: Store
    cancel_channel: str

    _check_open: Callable[[], None]

    async def workflow(self, workflow_id: str) -> WorkflowInfo | None:
        """Workflow ``workflow_id`` (or that of the step with that job id), step by step;
        ``None`` when there is none (``WorkflowOps``).

        Raises:
            ConfigError: the id is not a UUID.
            BackendError: the database failed.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        return await workflow_info(self._store, workflow_id)

    async def workflows(self, limit: int = 50) -> list[WorkflowSummary]:
        """The ``limit`` most recently enqueued workflows, newest first (``WorkflowOps``).

        Raises:
            ConfigError: ``limit`` is not a whole number from 1.
            BackendError: the database failed.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        return await workflow_list(self._store, limit)

    async def cancel_workflow(self, workflow_id: str) -> WorkflowCancel:
        """Cancel workflow ``workflow_id`` (or that of the step with that job id): pending and
        waiting steps end cancelled; running ones are told through ``cancel_channel`` and end
        cancelled when their runs do (``WorkflowOps``).

        Raises:
            ConfigError: the id is not a UUID.
            BackendError: the database failed; nothing changed.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        return await cancel_workflow(self._store, workflow_id, self.cancel_channel)
