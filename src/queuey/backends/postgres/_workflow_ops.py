"""Listing, showing and cancelling workflows on PostgreSQL (``WorkflowOps``): the statements
``workflow_steps``, ``workflow_list`` and ``cancel_workflow`` run through a store, shared by
``PostgresBackend`` (``WorkflowOpsMixin``) and ``Admin``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import AsyncRowFactory, TupleRow, dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool

from queuey._validation import check_int
from queuey.backends.base import JobState
from queuey.backends.postgres._errors import database_errors
from queuey.backends.postgres._ids import parse_id
from queuey.backends.postgres._sql import Statements
from queuey.backends.postgres._store import Store
from queuey.backends.workflow_ops import (
    WorkflowCancel,
    WorkflowInfo,
    WorkflowStep,
    WorkflowSummary,
    step_parents,
    workflow_state,
)

__all__ = [
    "DashboardWorkflows",
    "WorkflowOpsMixin",
    "cancel_workflow",
    "info_of",
    "workflow_info",
    "workflow_list",
]


async def workflow_info(store: Store, workflow_id: str) -> WorkflowInfo | None:
    """``workflow_steps`` as a ``WorkflowInfo``; ``None`` when no step has that workflow.

    Raises:
        ConfigError: ``workflow_id`` is not a UUID.
    """
    params = {"id": parse_id(workflow_id)}
    return info_of(await store._fetch("workflow_steps", params, dict_row))


def info_of(rows: Sequence[dict[str, Any]]) -> WorkflowInfo | None:
    """The rows of ``workflow_steps`` as a ``WorkflowInfo`` (``None`` for none)."""
    if not rows:
        return None
    return WorkflowInfo(str(rows[0]["workflow"]), tuple(_step(row) for row in rows))


def _step(row: dict[str, Any]) -> WorkflowStep:
    state: JobState = row["status"]
    parents = step_parents(row["step"], row["headers"])
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


class DashboardWorkflows:
    """The dashboard's read of a workflow, for ``PgDashboardStore`` (its pool and the
    statements of ``queries.sql`` it holds)."""

    _pool: AsyncConnectionPool[AsyncConnection[TupleRow]]
    _checks: Statements
    cancel_channel: str
    open: Callable[[], Awaitable[None]]
    _fetch: Callable[
        [sql.SQL | sql.Composed, Mapping[str, Any], AsyncRowFactory[Any]], Awaitable[list[Any]]
    ]

    async def workflow(self, job_id: str) -> WorkflowInfo | None:
        """The workflow of job ``job_id`` (a UUID string; or a workflow id) step by step;
        ``None`` when the job is not a workflow step.

        Raises:
            ConfigError: ``job_id`` is not a UUID.
            BackendError: the database failed.
        """
        params = {"id": parse_id(job_id)}
        return info_of(await self._fetch(self._checks["workflow_steps"], params, dict_row))

    async def workflow_of(self, job_id: str) -> str | None:
        """The id of the workflow job ``job_id`` (a UUID string) is a step of; ``None`` when
        it is none's (or there is no such job).

        Raises:
            ConfigError: ``job_id`` is not a UUID.
            BackendError: the database failed.
        """
        params = {"id": parse_id(job_id)}
        await self.open()
        with database_errors():
            async with self._pool.connection() as conn:
                cursor = await conn.execute(self._checks["workflow_of"], params)
                row = await cursor.fetchone()
                return None if row is None or row[0] is None else str(row[0])

    async def cancel_workflow(self, actor: str, workflow_id: str) -> WorkflowCancel:
        """Cancel workflow ``workflow_id`` (or that of the step with that job id) as
        ``queuey workflows cancel`` does, running steps told on ``cancel_channel``; audited
        as "cancel workflow" in the same transaction.

        Raises:
            ConfigError: the id is not a UUID.
            BackendError: the database failed; nothing changed.
        """
        found = parse_id(workflow_id)
        await self.open()
        with database_errors():
            async with self._pool.connection() as conn, conn.transaction():
                params = {"id": found, "channel": self.cancel_channel}
                cursor = await conn.execute(self._checks["cancel_workflow"], params)
                cancelled, requested = await cursor.fetchone() or (0, 0)
                audit = {"actor": actor, "action": "cancel workflow", "kind": None, "queue": None}
                audit |= {"job_id": None, "filter": f"workflow {found}"}
                audit["count"] = cancelled + requested
                await conn.execute(self._checks["record_action"], audit)
        return WorkflowCancel(int(cancelled), int(requested))
