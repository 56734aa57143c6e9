"""The memory backend's unique keys, idempotency keys, schedules and wall clock.

``Keys`` mirrors what PostgreSQL keeps on its rows: which job holds each full unique key, the
state of every job published with a key (a move into a state outside its refused set releases
the key; a move back to pending takes it back, unless a newer job holds it: see ``back``; a
running debounced job holds its key with ``#running`` appended, so one pending successor can
wait behind it), the idempotency keys of topic publications with the time they
were used, and the schedules' shared records. The wall clock is the event loop's: anchored to
the real time (or to ``start``) at first use, it then advances with the loop's clock, so under
virtual time (looptime) a day of slots passes in no wall time.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from queuey.schedule import ScheduleRecord
from queuey.unique import STATE_BITS, State

__all__ = ["RUNNING", "Holder", "Keys", "WallClock", "superseded"]

RUNNING = "#running"
"""Appended to the key a running debounced job holds (as on PostgreSQL)."""

_ENDED = STATE_BITS["done"] | STATE_BITS["failed"]


def superseded(rival: str) -> str:
    """The error of a job that came back to pending while job ``rival`` held its unique key
    (the text PostgreSQL records)."""
    return (
        f"superseded: job {rival} holds its unique key (enqueued while this one ran); "
        "running this one again would run the key twice"
    )


class WallClock:
    """Wall time that advances with the running event loop's clock.

    Args:
        start: the wall time at first use (default: the real time then).
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start
        self._anchor: tuple[float, float] | None = None

    def epoch(self) -> float:
        """Seconds since the Unix epoch, now."""
        loop_now = asyncio.get_running_loop().time()
        if self._anchor is None:
            wall = time.time() if self._start is None else self._start.timestamp()
            self._anchor = (wall, loop_now)
        wall, at = self._anchor
        return wall + (loop_now - at)

    def now(self) -> datetime:
        """The current wall time (UTC)."""
        return datetime.fromtimestamp(self.epoch(), UTC)


@dataclass
class Holder:
    """A job published with a unique key: the key it holds now (``None`` once released), its
    own full key, its refused states, whether it debounces, and its state."""

    key: str | None
    kept: str
    mask: int
    replace: bool
    state: State

    @property
    def debounced(self) -> bool:
        """``on_conflict="replace"`` refusing pending and running only: while it runs, a
        newer duplicate waits behind it as its successor."""
        return self.replace and bool(self.mask & STATE_BITS["running"]) and not self.mask & _ENDED


@dataclass
class _Use:
    ids: tuple[str, ...]
    fingerprint: str
    at: float


class Keys:
    """Unique keys, idempotency keys and schedules of one memory backend."""

    def __init__(self) -> None:
        self.holders: dict[str, str] = {}  # full key -> job id
        self.jobs: dict[str, Holder] = {}  # job id -> its state
        self.used: dict[str, _Use] = {}  # idempotency key -> first publication
        self.schedules: dict[str, ScheduleRecord] = {}

    def holder(self, key: str) -> str | None:
        """The id of the job holding ``key``, if any."""
        return self.holders.get(key)

    def take(self, key: str, job_id: str, mask: int, replace: bool = False) -> None:
        """Job ``job_id`` (pending) now holds ``key``."""
        self.holders[key] = job_id
        self.jobs[job_id] = Holder(key, key, mask, replace, "pending")

    def moved(self, job_id: str, state: State) -> bool:
        """Job ``job_id`` moved into ``state`` (running, done or failed): its key is released
        unless ``state`` is refused; a debounced job starting holds it as ``#running``
        (nothing happens for a job published without a key). Whether a ``#running`` key was
        released (its successor may run now)."""
        holder = self.jobs.get(job_id)
        if holder is None:
            return False
        holder.state = state
        if holder.key is None:
            return False
        if state == "running" and holder.debounced:
            self._hold(holder, job_id, holder.kept + RUNNING)
        elif not holder.mask & STATE_BITS[state]:
            released = holder.key.endswith(RUNNING)
            self._hold(holder, job_id, None)
            return released
        return False

    def back(self, job_id: str) -> str | None:
        """Job ``job_id`` goes back to pending (a retry, a deferral, a hand-back): it takes
        its own key back. When another job holds that key by now (a newer duplicate enqueued
        while this one ran), that job's id: this one is superseded and must not run again."""
        holder = self.jobs.get(job_id)
        if holder is None:
            return None
        rival = self.holders.get(holder.kept)
        if rival is not None and rival != job_id:
            return rival
        holder.state = "pending"
        self._hold(holder, job_id, holder.kept)
        return None

    def held_back(self, job_id: str) -> bool:
        """Whether pending job ``job_id`` waits for its key's running holder to end (a
        debounced successor is never run beside the run it follows)."""
        holder = self.jobs.get(job_id)
        return holder is not None and holder.debounced and holder.kept + RUNNING in self.holders

    def release(self, job_id: str) -> None:
        """Job ``job_id`` was cancelled: its key is released and it is forgotten."""
        holder = self.jobs.pop(job_id, None)
        if holder is not None:
            self._hold(holder, job_id, None)

    def _hold(self, holder: Holder, job_id: str, key: str | None) -> None:
        """``holder`` (job ``job_id``) now holds ``key`` instead of the one it held."""
        if holder.key is not None and self.holders.get(holder.key) == job_id:
            del self.holders[holder.key]
        holder.key = key
        if key is not None:
            self.holders[key] = job_id

    def state(self, job_id: str) -> State | None:
        """The state of a job published with a key; ``None`` for any other."""
        holder = self.jobs.get(job_id)
        return None if holder is None else holder.state

    def first_use(self, key: str, now: float, window: float) -> _Use | None:
        """The publication recorded under ``key`` within ``window`` seconds of ``now``."""
        use = self.used.get(key)
        if use is None or now - use.at >= window:
            return None
        return use

    def use(self, key: str, ids: tuple[str, ...], fingerprint: str, now: float) -> None:
        """Record the publication of ``ids`` under ``key`` at ``now``."""
        self.used[key] = _Use(ids, fingerprint, now)

    def register(self, record: ScheduleRecord, now: datetime) -> None:
        """Create the schedule, or update its expression and zone (keeping its state); a
        changed expression or zone takes effect at ``now``."""
        known = self.schedules.get(record.name)
        if known is None:
            self.schedules[record.name] = replace(record)
        elif (known.expression, known.tz) != (record.expression, record.tz):
            self.schedules[record.name] = replace(
                known, expression=record.expression, tz=record.tz, declared_at=now
            )

    def fired(self, name: str, slot: datetime, job_id: str, now: datetime) -> None:
        """Slot ``slot`` of ``name`` fired as ``job_id`` (the last slot only moves forward)."""
        known = self.schedules.get(name)
        if known is None or (known.last_slot is not None and known.last_slot >= slot):
            return
        self.schedules[name] = replace(known, last_slot=slot, last_fired_at=now, last_job_id=job_id)

    def pause(self, name: str, paused: bool) -> bool:
        """Set the paused flag of ``name``; ``False`` when unknown."""
        known = self.schedules.get(name)
        if known is None:
            return False
        self.schedules[name] = replace(known, paused=paused)
        return True
