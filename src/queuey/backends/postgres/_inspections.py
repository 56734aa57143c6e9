"""The statements that look at rows and act on them by hand: counts and dead letters
(``count_pending``, ``list_dead``, ``purge``), the operations of the CLI and the dashboard
(``ops_*``, ``job_info``, ``queue_exists``) and their audit rows (``record_action``). Part of
``Store`` (``Store`` inherits them); run only through it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.rows import class_row, scalar_row

from queuey.backends.base import JobInfo
from queuey.backends.postgres._errors import KeyTakenError
from queuey.backends.postgres._rows import (
    DeadRow,
    FailedRow,
    Held,
    QueueStatus,
    RowDetail,
    Touched,
    job_info,
    with_errors,
)
from queuey.backends.postgres._statement_runner import StatementRunner
from queuey.envelope import Kind

__all__ = ["InspectionStatements"]

Params = dict[str, Any]


class InspectionStatements(StatementRunner):
    """``Store``'s statements that inspect rows and operate on them (see the module)."""

    async def count_pending(self, kind: Kind, queue: str) -> int:
        """``count_pending``: rows of ``queue`` due now and not claimed."""
        params = {"kind": kind, "queue": queue}
        (pending,) = await self._fetch("count_pending", params, scalar_row)
        return int(pending)

    async def list_dead(self, kind: Kind, queue: str, limit: int) -> list[DeadRow]:
        """``list_dead``: up to ``limit`` failed rows of ``queue``, oldest failure first."""
        params = {"kind": kind, "queue": queue, "limit": limit}
        return await self._fetch("list_dead", params, class_row(DeadRow))

    async def purge(self, queues: Sequence[str]) -> int:
        """``purge``: delete every row of the typed ``queues``; returns the count."""
        return await self._count("purge", {"queues": list(queues)})

    async def ops_status(self) -> list[QueueStatus]:
        """``ops_status``: counts of live rows per (kind, queue)."""
        return await self._fetch("ops_status", {}, class_row(QueueStatus))

    async def ops_failed(
        self, queue: str | None, limit: int | None, status: str = "failed"
    ) -> list[FailedRow]:
        """``ops_failed``: rows of ``status`` (failed or cancelled; of ``queue``), oldest
        first, at most ``limit``."""
        params = {"queue": queue, "limit": limit, "status": status}
        return await self._fetch("ops_failed", params, class_row(FailedRow))

    async def ops_show(self, row_id: str) -> RowDetail | None:
        """``ops_show``: one row by id, whatever its status."""
        rows = await self._fetch("ops_show", {"id": row_id}, class_row(RowDetail))
        return with_errors(rows[0]) if rows else None

    async def job_info(self, job_id: str) -> JobInfo | None:
        """``job_info``: one job by id (a UUID string), whatever its status; due time in UTC."""
        rows = await self._fetch("job_info", {"id": job_id}, class_row(JobInfo))
        return job_info(rows[0]) if rows else None

    async def queue_exists(self, queue: str) -> bool:
        """``queue_exists``: whether any row, of any kind and status, is on ``queue``."""
        (known,) = await self._fetch("queue_exists", {"queue": queue}, scalar_row)
        return bool(known)

    async def ops_retry(
        self,
        row_id: str | None,
        queue: str | None,
        channel: str,
        status: str = "failed",
    ) -> list[Touched]:
        """``ops_retry``: rows of ``status`` (this one, of this queue) pending again, due now;
        one notification on ``channel`` per queue."""
        params = {"id": row_id, "queue": queue, "channel": channel, "status": status}
        for tries in range(1, 4):
            try:
                return await self._fetch("ops_retry", params, class_row(Touched))
            except KeyTakenError:  # a job took a key between the snapshot and the write
                if tries == 3:
                    raise
        raise AssertionError("unreachable")

    async def ops_held(self, row_id: str | None, queue: str | None, status: str) -> list[Held]:
        """``ops_held``: rows of ``status`` (this one, of this queue) that a retry leaves
        alone because another job holds their unique key."""
        params = {"id": row_id, "queue": queue, "status": status}
        return await self._fetch("ops_held", params, class_row(Held))

    async def ops_discard(
        self, row_id: str | None, queue: str | None, status: str = "failed"
    ) -> list[Touched]:
        """``ops_discard``: delete rows of ``status`` (this one, of this queue)."""
        params = {"id": row_id, "queue": queue, "status": status}
        return await self._fetch("ops_discard", params, class_row(Touched))

    async def record_action(self, params: Params) -> None:
        """``record_action``: one audit row (actor, action, kind, queue, job_id, filter,
        count)."""
        await self._count("record_action", params)
