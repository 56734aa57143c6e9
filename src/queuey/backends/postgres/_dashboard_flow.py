"""The flow actions of ``PgDashboardStore`` (also what ``Admin`` and ``queuey queues`` run):
pausing a queue (its limit zero) and setting its flow limits at run time. Each is one audited
statement of ``sql/dashboard.sql`` that the claim of every process reads at its next claim
(the pause table of migration 0004, the ``{flow_set}`` table of migration 0018), and that wakes
the queue's consumers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from psycopg import sql
from psycopg.rows import AsyncRowFactory, class_row

from queuey.backends.flow_view import FlowKey, FlowQueue, LimitsSet
from queuey.backends.postgres._flow import limited_claim, limits_json
from queuey.backends.postgres._sql import Statements
from queuey.limits import LimitSpec, shown_limits

__all__ = ["FlowActions"]

_R = TypeVar("_R")


class _Runs(Protocol):
    job_channel: str
    topic_channel: str
    schema: str
    table: str
    _pool: Any

    async def _rows(self, name: str, params: Mapping[str, Any], row: type[_R]) -> list[_R]: ...

    async def _fetch(
        self,
        statement: sql.SQL | sql.Composed,
        params: Mapping[str, Any],
        rows: AsyncRowFactory[_R],
    ) -> list[_R]: ...

    async def _execute(self, name: str, params: Mapping[str, Any]) -> Sequence[tuple[Any, ...]]: ...

    async def open(self) -> None: ...


@dataclass(frozen=True)
class _Limited:
    """A row of ``flow_queues``."""

    kind: str
    queue: str
    declared: str
    shown: str
    source: str
    paused: bool


class FlowActions:
    """Pause, resume and set limits, on the statements of a ``PgDashboardStore``."""

    async def pause(self: _Runs, actor: str, kind: str, queue: str) -> bool:
        """Pause a queue (``kind`` job or topic) or a topic app (``kind`` app, ``queue`` its
        prefix): its limit zero, from the next claim of every process on; audited. Returns
        whether it was running before."""
        rows = await self._execute("pause", {"actor": actor, "kind": kind, "queue": queue})
        return bool(rows and rows[0][0])

    async def resume(self: _Runs, actor: str, kind: str, queue: str) -> bool:
        """Undo ``pause`` and wake its consumers; audited. Returns whether it was paused."""
        params = {"actor": actor, "kind": kind, "queue": queue, "job_channel": self.job_channel}
        rows = await self._execute("resume", params | {"topic_channel": self.topic_channel})
        return bool(rows and rows[0][0])

    async def set_limits(
        self: _Runs, actor: str, kind: str, queue: str, limits: Sequence[LimitSpec] | None
    ) -> str:
        """Put ``limits`` (the queue's and its job types') in place of the queue's declared
        flow limits, from the next claim of every process on (``None``: the declared ones
        again; an empty list: no limit), and wake its consumers; audited with who, when and
        ``"<old> -> <new>"``, which it returns."""
        params = {
            "actor": actor,
            "kind": kind,
            "queue": queue,
            "limits": None if limits is None else limits_json(limits),
            "shown": shown_limits(limits),
            "job_channel": self.job_channel,
            "topic_channel": self.topic_channel,
        }
        rows = await self._execute("set_limits", params)
        return str(rows[0][0]) if rows else ""

    async def unknown_names(
        self: _Runs, kind: str, queue: str, job_types: Sequence[str] = ()
    ) -> list[str]:
        """What of an operator's names this table does not know: ``"queue"`` when no row,
        declared or set limit, or pause names ``queue``; then each of ``job_types`` that no
        row of the queue (nor its declared limits) has."""
        params = {"kind": kind, "queue": queue, "job_types": list(job_types)}
        return [str(row[0]) for row in await self._execute("unknown_names", params)]

    async def limits_set(self: _Runs) -> list[LimitsSet]:
        """Every queue whose limits were set at run time, by kind then name."""
        return await self._rows("limits_set", {}, LimitsSet)

    async def flow_view(self: _Runs) -> list[FlowQueue]:
        """Every queue with flow limits (declared by its workers or set at run time) and what
        they hold back now, per limit and key (``flow_keys``: read-only, as a claim counts
        among the queue's oldest 200 due rows), by kind then name.

        Raises:
            BackendError: the database cannot be reached or a statement failed.
        """
        statement = Statements(self.schema, self.table)["flow_keys"]
        views = []
        for row in await self._rows("flow_queues", {}, _Limited):
            params: dict[str, Any] = {"kind": row.kind, "queue": row.queue, "app": None}
            params["job_types"] = None
            params |= limited_claim(()) | {"limits": row.declared}  # the claim's own
            keys = tuple(await self._fetch(statement, params, class_row(FlowKey)))
            view = FlowQueue(row.kind, row.queue, row.shown, row.source, row.paused)
            views.append(replace(view, keys=keys))
        return views
