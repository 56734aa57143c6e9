"""The statements of a claimed row's life: ``claim`` (plain, aged or limited by flow
control), the fenced settles of one run (release, reschedule, dead letter, complete, cancel),
the handler's transaction, and the maintenance that keeps claims honest (lease extension,
reclaiming expired leases, message TTL, pruning). Every settle is fenced by owner and attempt.
Part of ``Store`` (``Store`` inherits them); run only through it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from operator import attrgetter
from typing import Any

from psycopg.rows import class_row, scalar_row, tuple_row

from queuey.attempts import MAX_ATTEMPT_ERRORS
from queuey.backends.postgres._arrays import text_array
from queuey.backends.postgres._errors import KeyTakenError, database_errors
from queuey.backends.postgres._flow import limited_claim
from queuey.backends.postgres._pool import Connection
from queuey.backends.postgres._rows import Claimed, EndRow, Reclaimed, claim_rows
from queuey.backends.postgres._statement_runner import StatementRunner
from queuey.queues import QueueConfig

log = logging.getLogger("queuey.postgres")

__all__ = ["BACKGROUND_TIMEOUT", "ClaimStatements"]

Params = dict[str, Any]

BACKGROUND_TIMEOUT = 5.0
"""How long the statements of consumers, settles and maintenance wait for a pooled connection
(seconds); publishes wait ``publish_timeout``, inspections as long as the pool's default."""

_IN_CLAIM_ORDER = attrgetter("position")


class ClaimStatements(StatementRunner):
    """``Store``'s statements that claim rows, settle one run and maintain claims (see the
    module)."""

    async def claim(self, config: QueueConfig, limit: int) -> Claimed:
        """``claim``: take up to ``limit`` due rows of ``config``'s queue (of its job types) for
        ``lease`` seconds; returned in claim order (priority, aged when the queue ages
        priorities, due time, insertion). A short
        claim also tells, in the same round trip, when the queue's next row falls due."""
        params: dict[str, Any] = {"kind": config.kind, "queue": config.name, "app": config.app}
        params |= {"limit": limit, "owner": self.owner, "lease": self.lease}
        params["job_types"] = _job_types(config)
        name, extra = self.flow.statement(config)  # claim, claim_aged or claim_limited
        limited, params = name == "claim_limited", params | extra
        first = self.statements["claim_lock"] if limited else None
        rows, _ = await self._run(
            self.statements[name], params, claim_rows(config), BACKGROUND_TIMEOUT,
            claim=True, first=first,
        )  # fmt: skip
        if rows and self.flow.saw(config, rows[0][2], limited):  # limits set at run time
            return await self.claim(config, limit)
        claims = [claim for claim, _, _ in rows if claim is not None]
        claims.sort(key=_IN_CLAIM_ORDER)
        due = rows[0][1] if rows else None
        return Claimed(claims, None if due is None else max(0.0, float(due)))

    async def job_ends(self, ids: Sequence[str]) -> list[EndRow]:
        """``job_ends``: how each of ``ids`` (UUID strings) stands; a missing one has no row."""
        params = {"ids": text_array(ids)}
        return await self._fetch("job_ends", params, class_row(EndRow), BACKGROUND_TIMEOUT)

    async def release(self, row_id: str, attempts: int) -> bool:
        """``release``: hand run ``attempts`` of ``row_id`` back, due now, the run not counted.
        Like every fenced settle, ``False`` when this owner no longer holds that run."""
        landed, _ = await self._back("release", row_id, attempts, {})
        return landed

    async def reschedule(
        self,
        row_id: str,
        attempts: int,
        *,
        next_attempts: int,
        deferrals: int,
        priority: int,
        delay: float,
        ttl: float | None,
        error: str | None,
        failure: str | None = None,
    ) -> tuple[bool, str | None]:
        """``reschedule`` (a retry or deferral): pending again after ``delay`` seconds with these
        counts, expiring ``ttl`` seconds after that, ``error`` kept unless ``None``, ``failure``
        (an attempt error as JSON text) added to the row's errors unless ``None``. Returns
        whether the fence let it land, and the id of the job that superseded this one (the
        row then ended cancelled), else ``None``."""
        changes = {
            "next_attempts": next_attempts,
            "deferrals": deferrals,
            "priority": priority,
            "delay": delay,
            "ttl": ttl,
            "error": error,
            "failure": failure,
            "keep_errors": MAX_ATTEMPT_ERRORS,
        }
        return await self._back("reschedule", row_id, attempts, changes)

    async def dead_letter(
        self, row_id: str, attempts: int, reason: str, failure: str | None = None
    ) -> bool:
        """``dead_letter``: failed for good with ``reason`` (``failure``: as for
        ``reschedule``)."""
        params = {
            "reason": reason,
            "failure": failure,
            "keep_errors": MAX_ATTEMPT_ERRORS,
            "channel": self.channel,
        }
        return await self._fenced("dead_letter", row_id, attempts, params)

    async def finish_cancel(self, row_id: str, attempts: int) -> bool:
        """``finish_cancel``: the run whose cancel was asked for has ended; the row is
        cancelled now (``False``: this owner no longer holds that run)."""
        return await self._fenced("finish_cancel", row_id, attempts, {"channel": self.channel})

    async def claim_state(self, row_id: str, attempts: int) -> tuple[bool, bool]:
        """``claim_state``: whether this owner still holds run ``attempts`` of ``row_id``, and
        whether its cancel was asked for (both false when there is no such row)."""
        params = {"id": row_id, "owner": self.owner, "attempts": attempts}
        rows = await self._fetch("claim_state", params, tuple_row)
        return (bool(rows[0][0]), bool(rows[0][1])) if rows else (False, False)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """A pooled connection inside a transaction, committed on a clean exit and rolled back
        otherwise (a handler's ``ctx.transaction()``).

        Raises:
            BackendError: the connection, the commit or a statement of the body failed.
        """
        with database_errors():
            async with self._where().connection() as conn, conn.transaction():
                yield conn

    async def complete(self, conn: Connection, row_id: str, attempts: int) -> bool:
        """``complete``: record run ``attempts`` of ``row_id`` done on ``conn`` (the handler's
        transaction); ``False`` when the fence refused it (claim lost or job cancelled)."""
        fence = {"id": row_id, "owner": self.owner, "attempts": attempts, "channel": self.channel}
        with database_errors():
            cursor = await conn.execute(self.statements["complete"], fence)
        return cursor.rowcount > 0

    async def cancel(self, row_id: str, channel: str) -> str | None:
        """``cancel``: a pending or running row becomes cancelled (a running one's owner is told
        on ``channel``); returns the status it had, ``None`` when no such row could be."""
        params = {"id": row_id, "channel": channel, "wake_channel": self.channel}
        rows = await self._fetch("cancel", params, scalar_row)
        return str(rows[0]) if rows else None

    async def _back(
        self, name: str, row_id: str, attempts: int, params: Params
    ) -> tuple[bool, str | None]:
        """A fenced statement that puts the row back to pending, where a unique job takes its
        key back or ends superseded (logged at WARNING). Run again when another row took the
        key between the statement's snapshot and its write (it then sees that row)."""
        fence = {"id": row_id, "owner": self.owner, "attempts": attempts}
        for tries in range(1, 4):
            try:
                rows = await self._fetch(name, {**fence, **params}, tuple_row, BACKGROUND_TIMEOUT)
                break
            except KeyTakenError:
                if tries == 3:
                    raise
        if rows and rows[0][1] is not None:
            log.warning(
                "job %s ends cancelled, superseded by job %s, which holds its unique key "
                "(enqueued while it ran): running it again would run the key twice",
                row_id,
                rows[0][1],
                extra={"job_id": row_id},
            )
            return True, str(rows[0][1])
        return bool(rows), None

    async def _fenced(self, name: str, row_id: str, attempts: int, params: Params) -> bool:
        fence = {"id": row_id, "owner": self.owner, "attempts": attempts}
        return await self._count(name, {**fence, **params}, BACKGROUND_TIMEOUT) > 0

    # -- maintenance ---------------------------------------------------------------------------

    async def extend(self, ids: Collection[str]) -> dict[str, bool]:
        """``extend``: push the lease of the rows of ``ids`` this owner still runs; returns
        those, each with whether its cancel was asked for (a missing one is no longer this
        owner's)."""
        params = {"ids": list(ids), "owner": self.owner, "lease": self.lease}
        rows = await self._fetch("extend", params, tuple_row, BACKGROUND_TIMEOUT)
        return {str(row_id): bool(cancel) for row_id, cancel in rows}

    async def extend_progress(
        self, ids: Collection[str], progress: dict[str, str]
    ) -> dict[str, bool]:
        """``extend_progress``: as ``extend``, writing each row's reported progress (JSON
        text) of ``progress`` with its lease."""
        params = {
            "ids": list(ids),
            "owner": self.owner,
            "lease": self.lease,
            "progress_ids": text_array(progress),
            "progress": text_array(progress.values()),
        }
        rows = await self._fetch("extend_progress", params, tuple_row, BACKGROUND_TIMEOUT)
        return {str(row_id): bool(cancel) for row_id, cancel in rows}

    async def reclaim(self, max_redeliveries: int) -> list[Reclaimed]:
        """``reclaim``: rows whose lease expired back to pending (failed once they lost
        ``max_redeliveries`` leases)."""
        params = {"max_redeliveries": max_redeliveries, "channel": self.channel}
        return await self._fetch("reclaim", params, class_row(Reclaimed), BACKGROUND_TIMEOUT)

    async def expire(self) -> int:
        """``expire``: dead-letter pending rows past their message TTL; returns the count."""
        return await self._count("expire", {"channel": self.channel}, BACKGROUND_TIMEOUT)

    async def prune(self, retain: float, limit: int) -> int:
        """``prune``: delete up to ``limit`` done rows older than ``retain`` seconds."""
        return await self._count("prune", {"retain": retain, "limit": limit}, BACKGROUND_TIMEOUT)

    async def flow_held(self, config: QueueConfig) -> tuple[int, int]:
        """``flow_held``: the due rows of ``config``'s queue its concurrency caps and its rate
        limits hold back now (``config.limits`` must not be empty)."""
        params: dict[str, Any] = {"kind": config.kind, "queue": config.name, "app": config.app}
        params |= {"job_types": _job_types(config), **limited_claim(config.limits)}
        rows = await self._fetch("flow_held", params, tuple_row)
        return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)


def _job_types(config: QueueConfig) -> list[str] | None:
    return None if config.job_types is None else list(config.job_types)
