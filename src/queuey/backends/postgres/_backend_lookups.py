"""The methods of ``PostgresBackend`` that read or change rows by name or id rather than run
jobs: the schedules' shared state (``ScheduleBackend``), cancelling a job, inspection
(flow-limit tallies, queue depths, pending counts, dead letters, one job, purge) and waiting
for a job's end (``ResultBackend``). Each checks that the backend is open, then asks the store
(``wait_end``: the awaiters); ``PostgresBackend`` inherits them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import cast

from queuey.backends.base import CancelResult, JobEnd, JobInfo, QueueDepth
from queuey.backends.postgres._awaiters import Awaiters
from queuey.backends.postgres._cancel import cancel_result
from queuey.backends.postgres._ids import job_id_or_none
from queuey.backends.postgres._store import Store
from queuey.envelope import Envelope, Kind
from queuey.errors import UnknownJobError
from queuey.limits import Throttled
from queuey.schedule import ScheduleRecord
from queuey.unique import State

__all__ = ["LookupMethods"]


class LookupMethods:
    """The schedule, cancel and inspection methods of ``PostgresBackend`` (its store, cancel
    channel and open check)."""

    _store: Store
    _awaiters: Awaiters
    cancel_channel: str

    _check_open: Callable[[], None]

    async def clock(self) -> datetime:
        """The database's ``now()``.

        Raises:
            BackendError: the database failed.
        """
        self._check_open()
        return await self._store.clock()

    async def job_state(self, job_id: str) -> State | None:
        """The status of job ``job_id``; ``None`` when there is no such row (any more)."""
        self._check_open()
        return cast("State | None", await self._store.job_state(job_id))

    async def register_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        """Create or update the schedules (their last slot and paused flag are kept)."""
        self._check_open()
        if records:
            await self._store.register_schedules(records)

    async def list_schedules(self, names: Sequence[str] | None = None) -> list[ScheduleRecord]:
        """The known schedules (of ``names`` only, when given), by name."""
        self._check_open()
        return await self._store.list_schedules(names)

    async def record_fired(self, name: str, slot: datetime, job_id: str) -> None:
        """Record that ``slot`` of ``name`` fired as ``job_id`` (the last slot only moves
        forward)."""
        self._check_open()
        await self._store.record_fired(name, slot, job_id)

    async def set_schedule_paused(self, name: str, paused: bool) -> bool:
        """Pause or resume schedule ``name``, for every worker; ``False`` when unknown."""
        self._check_open()
        return await self._store.pause_schedule(name, paused)

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job ``job_id``: a pending or scheduled row becomes ``cancelled``; a running
        one too, and its worker is told through a NOTIFY on ``cancel_channel`` (its handler is
        cancelled, and every later settle of that run is refused by the fence).

        Returns:
            As ``Producer.cancel``; ``"not_found"`` also for an id that is not a UUID.

        Raises:
            BackendError: the database failed; nothing changed.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        found = job_id_or_none(job_id)
        if found is None:
            return "not_found"
        was = await self._store.cancel(found, self.cancel_channel)
        return cancel_result(was)

    def throttled(self) -> list[Throttled]:
        """What this backend's claims held back under flow limits (``ThrottleBackend``)."""
        return self._store.flow.tally.snapshot()

    async def queue_depths(self) -> list[QueueDepth]:
        """Every (kind, queue) with live rows, counted in one statement (``ops_status``):
        due, scheduled, running and failed rows and the oldest due row's wait.

        Raises:
            BackendError: the database failed.
        """
        self._check_open()
        return await self._store.ops_status()

    async def count_pending(self, queue: str, kind: Kind = "job") -> int:
        """Rows of ``queue`` due now and not claimed.

        Raises:
            BackendError: the database failed.
        """
        self._check_open()
        return await self._store.count_pending(kind, queue)

    async def list_dead(
        self, queue: str, kind: Kind = "job", limit: int = 100
    ) -> list[tuple[Envelope, str]]:
        """Failed rows of ``queue``, oldest first, as ``(envelope, reason)``.

        Raises:
            BackendError: the database failed.
        """
        self._check_open()
        rows = await self._store.list_dead(kind, queue, limit)
        return [(row.envelope(kind, queue), row.reason) for row in rows]

    async def job(self, job_id: str) -> JobInfo | None:
        """Where job ``job_id`` (the id ``enqueue`` returned) is now: its state, attempts, last
        error and due time (``JobLookup``); ``None`` when there is no such row (never enqueued
        in this schema, or done and deleted after ``retain``, or an id that is not a UUID).

        Raises:
            BackendError: the database failed.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        found = job_id_or_none(job_id)
        return None if found is None else await self._store.job_info(found)

    async def purge(self, queues: Sequence[str]) -> int:
        """Delete every row of the given typed queues; returns the count."""
        self._check_open()
        return await self._store.purge(queues)

    async def wait_end(self, job_id: str, timeout: float | None) -> JobEnd | None:
        """Wait until job ``job_id`` is done, failed or cancelled (``ResultBackend``): at once
        when it is already, else when its end is announced on ``results_channel`` to this
        backend's one LISTEN connection (shared by every waiter; ``poll_only``: read again
        every ``poll_interval``). ``None`` after ``timeout`` seconds; the job is left alone.

        Raises:
            UnknownJobError: there is no such row (never enqueued in this schema, or done and
                deleted after ``retain``, or an id that is not a UUID).
            ShutDownError: the backend is not open.
        """
        self._check_open()
        found = job_id_or_none(job_id)
        if found is None:
            raise UnknownJobError(job_id)
        return await self._awaiters.wait(found, timeout)
