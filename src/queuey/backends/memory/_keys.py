"""The memory backend's unique keys, idempotency keys, schedules and wall clock.

``Keys`` mirrors what PostgreSQL keeps on its rows: which job holds each full unique key, the
state of every job published with a key (so a move into a state outside its refused set
releases the key, for good), the idempotency keys of topic publications with the time they
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

__all__ = ["Holder", "Keys", "WallClock"]


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
    """A job published with a unique key: its state, and the full key while it holds it."""

    key: str | None
    mask: int
    state: State


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

    def take(self, key: str, job_id: str, mask: int) -> None:
        """Job ``job_id`` (pending) now holds ``key``."""
        self.holders[key] = job_id
        self.jobs[job_id] = Holder(key, mask, "pending")

    def moved(self, job_id: str, state: State) -> None:
        """Job ``job_id`` moved into ``state``: its key is released unless ``state`` is
        refused (nothing happens for a job published without a key)."""
        holder = self.jobs.get(job_id)
        if holder is None:
            return
        holder.state = state
        if holder.key is not None and not holder.mask & STATE_BITS[state]:
            self.holders.pop(holder.key, None)
            holder.key = None

    def release(self, job_id: str) -> None:
        """Job ``job_id`` was cancelled: its key is released and it is forgotten."""
        holder = self.jobs.pop(job_id, None)
        if holder is not None and holder.key is not None:
            self.holders.pop(holder.key, None)

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
