"""The statements behind ``ScheduleBackend``: the database's clock, a job's status, and the
schedules' shared state (registered, last slot fired, paused). Part of ``Store`` (``Store``
inherits them); run only through it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from psycopg.rows import class_row, scalar_row

from queuey.backends.postgres._statement_runner import StatementRunner
from queuey.schedule import ScheduleRecord

__all__ = ["ScheduleStatements"]


class ScheduleStatements(StatementRunner):
    """``Store``'s schedule statements (see the module)."""

    async def clock(self) -> datetime:
        """``clock``: the database's ``now()``."""
        (now,) = await self._fetch("clock", None, scalar_row)
        return now  # type: ignore[no-any-return]

    async def job_state(self, row_id: str) -> str | None:
        """``job_state``: the status of row ``row_id``, ``None`` when there is none."""
        found = await self._fetch("job_state", {"id": row_id}, scalar_row)
        return str(found[0]) if found else None

    async def register_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        """``register_schedules``: create or update these schedules' expression and zone."""
        params = {
            "names": [r.name for r in records],
            "expressions": [r.expression for r in records],
            "zones": [r.tz for r in records],
        }
        await self._count("register_schedules", params)

    async def list_schedules(self, names: Sequence[str] | None) -> list[ScheduleRecord]:
        """``list_schedules``: the known schedules (of ``names``), by name."""
        params = {"names": None if names is None else list(names)}
        return await self._fetch("list_schedules", params, class_row(ScheduleRecord))

    async def record_fired(self, name: str, slot: datetime, job_id: str) -> None:
        """``record_fired``: move schedule ``name``'s last slot forward to ``slot``."""
        await self._count("record_fired", {"name": name, "slot": slot, "job_id": job_id})

    async def pause_schedule(self, name: str, paused: bool) -> bool:
        """``pause_schedule``: set the paused flag; ``False`` when no such schedule."""
        return await self._count("pause_schedule", {"name": name, "paused": paused}) > 0
