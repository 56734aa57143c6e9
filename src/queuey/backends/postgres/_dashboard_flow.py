"""The flow actions of ``PgDashboardStore`` (also what ``Admin`` and ``queuey queues`` run):
pausing a queue (its limit zero) and setting its flow limits at run time. Each is one audited
statement of ``sql/dashboard.sql`` that the claim of every process reads at its next claim
(the pause table of migration 0004, the ``{flow_set}`` table of migration 0018), and that wakes
the queue's consumers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from queuey.backends.dashboard_store import LimitsSet
from queuey.backends.postgres._flow import limits_json
from queuey.limits import LimitSpec, shown_limits

__all__ = ["FlowActions"]

_R = TypeVar("_R")


class _Runs(Protocol):
    job_channel: str
    topic_channel: str

    async def _rows(self, name: str, params: Mapping[str, Any], row: type[_R]) -> list[_R]: ...

    async def _execute(self, name: str, params: Mapping[str, Any]) -> Sequence[tuple[Any, ...]]: ...


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

    async def limits_set(self: _Runs) -> list[LimitsSet]:
        """Every queue whose limits were set at run time, by kind then name."""
        return await self._rows("limits_set", {}, LimitsSet)
