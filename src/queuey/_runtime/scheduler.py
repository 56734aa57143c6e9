"""``Scheduler``: fires the due slots of periodic schedules, in every worker that knows them.

There is no leader. Each worker reads the backend's clock (the database's ``now()``), works
out which slots of each schedule fell due since the last one it knows of (its own, or the one
recorded by any worker), and fires each with the unique key (schedule name, slot): however
many workers try a slot, one insert wins and the others learn its job id. Then it records the
slot (the record only moves forward) and sleeps until the next slot on the event loop's clock.

Missed slots (every worker was down, or late) follow the schedule's ``catch_up``: the newest
only (``"latest"``), up to ``catch_up_limit`` of them oldest first (``"all"``), or only a slot
at most ``grace`` late (``"none"``). A schedule with no record yet starts from now: nothing is
missed before its first worker. A paused schedule fires nothing, and the slots that fall due
while it is paused are skipped.

A missed slot is a slot of the schedule as it was declared when the slot fell due. The record
keeps the declaration in effect (expression and zone) and when it took effect (``declared_at``).
A worker whose declaration differs registers it: first it fires the missed slots of the
declaration recorded (they fell due under it), then its own takes effect from now, so it fires
from its next slot, never a slot the earlier declaration did not have. A worker whose
declaration is no longer the one recorded (another worker registered a newer one) fires nothing
of that schedule and says so. ``skip_if_running`` skips a slot while the previous firing
is still pending or running. A failing backend is logged and tried again a second later; it
never stops the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from queuey.backends.base import Backend, ScheduleBackend, UniqueBackend
from queuey.envelope import Envelope
from queuey.errors import ConfigError, QueueyError
from queuey.queues import QueueSet
from queuey.schedule import Periodic, Schedule, ScheduleRecord, Timing, slot_key
from queuey.unique import ALL_STATES, EnqueueResult, UniqueKey, state_mask

__all__ = [
    "MAX_SLEEP_SECS",
    "RETRY_SECS",
    "Entry",
    "Fire",
    "Scheduler",
    "job_entries",
    "schedule_backend",
    "running",
]

log = logging.getLogger("queuey.schedule")

MAX_SLEEP_SECS = 300.0
"""The longest the scheduler sleeps between two looks (a resumed schedule is seen by then)."""

RETRY_SECS = 1.0
"""How long the scheduler waits after a backend failure before it looks again."""

_LATE_MARGIN_SECS = 0.005  # wake just after a slot, not just before it

Fire = Callable[[datetime], Awaitable[EnqueueResult]]
"""Enqueues (or publishes) one slot of a schedule with its unique key; the job id it wrote or
found."""

_LIVE = ("pending", "running")


@dataclass
class Entry:
    """One schedule the scheduler fires, and how.

    Attributes:
        plan: the schedule (timing, catch-up rules).
        fire: enqueues one slot with the slot's unique key.
        cursor: the newest slot this worker fired, found fired or skipped (UTC).
        superseded: another worker registered another declaration of this schedule since.
    """

    plan: Periodic
    fire: Fire
    cursor: datetime | None = None
    superseded: bool = False


class Scheduler:
    """Fires ``entries`` on ``backend`` until cancelled (see the module docstring).

    Args:
        backend: the schedules' shared state and clock.
        entries: the schedules, with how each fires a slot.
    """

    def __init__(self, backend: ScheduleBackend, entries: Sequence[Entry]) -> None:
        self._backend = backend
        self._entries = list(entries)
        self._names = [entry.plan.name for entry in self._entries]
        self.fired = 0

    async def run(self) -> None:
        """Register the schedules, then fire their slots as they fall due, until cancelled."""
        if not self._entries:
            return
        while True:
            try:
                await self.register()
                break
            except QueueyError as exc:
                log.error("could not register the schedules: %s", exc)
                await asyncio.sleep(RETRY_SECS)
        while True:
            try:
                wait = await self.tick()
            except QueueyError as exc:
                log.error("schedules: %s; trying again in %gs", exc, RETRY_SECS)
                wait = RETRY_SECS
            await asyncio.sleep(wait)

    async def register(self) -> None:
        """Register the schedules; before a changed one takes effect, fire the slots its
        recorded declaration missed (see the module docstring).

        Raises:
            QueueyError: the backend failed.
        """
        now = await self._backend.clock()
        for record in await self._backend.list_schedules(self._names):
            entry = next(e for e in self._entries if e.plan.name == record.name)
            if not record.declares(entry.plan.timing) and not record.paused:
                await self._fire_recorded(entry, record, now)
        await self._backend.register_schedules([e.plan.record() for e in self._entries])

    async def _fire_recorded(self, entry: Entry, record: ScheduleRecord, now: datetime) -> None:
        """Fire the missed slots of ``record``'s declaration, which ``entry`` replaces."""
        since = _latest(record.last_slot, record.declared_at)
        try:
            timing = Timing.parse(record.expression, record.tz)
        except ConfigError:
            return  # a declaration this version cannot read has no slots to catch up
        if since is None:
            return
        log.info(
            "schedule %s: %s (%s) becomes %s (%s) from its next slot",
            *_declared(record, entry),
            extra={"schedule": record.name},
        )
        last_job = record.last_job_id
        for slot in _missed(entry.plan, timing, since, now):
            last_job = await self._fire(entry, last_job, slot)

    async def tick(self) -> float:
        """Fire every due slot now; the seconds until the next one (at most
        ``MAX_SLEEP_SECS``).

        Raises:
            QueueyError: the backend failed (what was fired stays fired).
        """
        now = await self._backend.clock()
        records = {r.name: r for r in await self._backend.list_schedules(self._names)}
        for entry in self._entries:
            record = records.get(entry.plan.name) or entry.plan.record()
            await self._fire_due(entry, record, now)
        upcoming = min(entry.plan.timing.next_after(now) for entry in self._entries)
        return min(MAX_SLEEP_SECS, (upcoming - now).total_seconds() + _LATE_MARGIN_SECS)

    async def _fire_due(self, entry: Entry, record: ScheduleRecord, now: datetime) -> None:
        if entry.cursor is None:  # first look: start from the record, or from now
            entry.cursor = _latest(record.last_slot, record.declared_at) or now
        last = max(entry.cursor, _latest(record.last_slot, record.declared_at) or entry.cursor)
        superseded = not record.declares(entry.plan.timing)
        if superseded and not entry.superseded:
            self._superseded(entry, record)
        entry.superseded = superseded
        if record.paused or superseded:
            entry.cursor = max(last, now)
            return
        due = _missed(entry.plan, entry.plan.timing, last, now)
        last_job = record.last_job_id
        for slot in due:
            last_job = await self._fire(entry, last_job, slot)
        entry.cursor = max(last, due[-1]) if due else last

    def _superseded(self, entry: Entry, record: ScheduleRecord) -> None:
        log.warning(
            "schedule %s: another worker declared it %s (%s) since; this worker's %s (%s) "
            "fires nothing of it until it is restarted",
            *_declared(record, entry),
            extra={"schedule": record.name},
        )

    async def _fire(self, entry: Entry, last_job: str | None, slot: datetime) -> str | None:
        """Fire ``slot`` (unless the previous firing ``last_job`` still runs and the plan says
        to skip); the schedule's latest job id after it."""
        plan = entry.plan
        if plan.skip_if_running and last_job is not None:
            state = await self._backend.job_state(last_job)
            if state in _LIVE:
                log.info(
                    "schedule %s: slot %s skipped, the previous run is still %s",
                    plan.name,
                    slot.isoformat(),
                    state,
                    extra={"schedule": plan.name, "job_id": last_job},
                )
                return last_job
        result = await entry.fire(slot)
        await self._backend.record_fired(plan.name, slot, result.job_id)
        if result.inserted:
            self.fired += 1
            log.info(
                "schedule %s fired slot %s",
                plan.name,
                slot.isoformat(),
                extra={"schedule": plan.name, "job_id": result.job_id},
            )
        return result.job_id


def _latest(*moments: datetime | None) -> datetime | None:
    """The latest of ``moments`` that are not ``None``; ``None`` when all are."""
    known = [moment for moment in moments if moment is not None]
    return max(known) if known else None


def _missed(plan: Periodic, timing: Timing, after: datetime, now: datetime) -> list[datetime]:
    """The slots of ``timing`` in ``(after, now]`` that ``plan``'s catch-up rules fire."""
    limit = plan.catch_up_limit if plan.catch_up == "all" else 1
    due = timing.slots(after, now, limit)
    if plan.catch_up == "none":
        due = [slot for slot in due if now - slot <= plan.grace]
    return due


def schedule_backend(backend: Backend) -> ScheduleBackend:
    """``backend`` if it keeps schedules and unique keys (PostgreSQL, memory).

    Raises:
        ConfigError: it does not (RabbitMQ).
    """
    if not (isinstance(backend, ScheduleBackend) and isinstance(backend, UniqueBackend)):
        raise ConfigError(
            f"schedules need PostgreSQL or memory: {type(backend).__name__} has no way to fire a "
            "slot once across workers"
        )
    return backend


def check_names(plans: Sequence[Periodic]) -> None:
    """Raises:
    ConfigError: two schedules share a name.
    """
    seen: set[str] = set()
    for plan in plans:
        if plan.name in seen:
            raise ConfigError(f"schedules: two schedules are named {plan.name!r}")
        seen.add(plan.name)


def job_entries(
    schedules: Sequence[Schedule], queue_set: type[QueueSet], backend: Backend
) -> list[Entry]:
    """The entries that enqueue each schedule's job on ``backend``.

    Raises:
        ConfigError: a schedule is not a ``Schedule``, its job belongs to another queue set,
            two share a name, or ``backend`` cannot keep schedules.
    """
    if not schedules:
        return []
    target = schedule_backend(backend)
    check_names(schedules)
    entries = []
    for schedule in schedules:
        if not isinstance(schedule, Schedule):
            raise ConfigError(f"schedules: expected Schedule(...), got {type(schedule).__name__}")
        job = schedule.job
        if job.job_queue().queue_set is not queue_set:
            raise ConfigError(
                f"Schedule {schedule.name!r}: job: {type(job).__qualname__} is not a job of "
                f"{queue_set.__name__}"
            )
        entries.append(Entry(schedule, _enqueuer(schedule, cast(UniqueBackend, target))))
    return entries


_EVERY_STATE = state_mask(ALL_STATES)


def _enqueuer(schedule: Schedule, backend: UniqueBackend) -> Fire:
    job = schedule.job
    name, queue, payload = job.job_name(), job.job_queue().name, job.model_dump(mode="json")

    async def fire(slot: datetime) -> EnqueueResult:
        envelope = Envelope.new(name, queue, payload)
        key = UniqueKey(slot_key(schedule.name, slot), _EVERY_STATE)
        (result,) = await backend.publish_unique([envelope], [key])
        return result

    return fire


@asynccontextmanager
async def running(scheduler: Scheduler | None) -> AsyncIterator[None]:
    """Run ``scheduler`` (if any) in the background for the block, cancelled at its end."""
    if scheduler is None:
        yield
        return
    task = asyncio.create_task(scheduler.run(), name="queuey-scheduler")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _declared(record: ScheduleRecord, entry: Entry) -> tuple[str, str, str, str, str]:
    """For a log line: the schedule's name, the timing (expression, zone) the table holds and
    the one this worker declares."""
    timing = entry.plan.timing
    return record.name, record.expression, record.tz, timing.expression(), timing.tz
