"""Flow limits on the memory backend: what each key of a queue holds (rows running, recent
starts), on the event loop's clock (virtual under looptime).

The same rules as the PostgreSQL claim: a row is handed out only while every limit that
applies to it (its queue's, its job type's) has room for its key; a concurrency share is held
from hand-out to settle; a rate limit keeps each key's theoretical time of its next start
(``tat``, a token bucket as ``RateLimit`` describes it). Each look considers every due row and
hands out the first, in queue order, that may start: a row of a key at its limit is passed over,
so a backlog of one key does not hold back the rows of others behind it (no round robin across
keys among rows that may start).

A pause is the limit zero (``PAUSED``) held beside the queue's limits, and limits set at run
time (``MemoryBackend.set_limits``) replace the declared ones until reset: every consumer of the
queue asks ``limits`` at each look, so both take effect at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from queuey.envelope import Envelope
from queuey.limits import PAUSED, LimitSpec

__all__ = ["Flow", "Holds"]

Holds = list[tuple[LimitSpec, str]]
"""The concurrency shares a handed-out row holds (its limits and keys)."""


class Flow:
    """Running rows and the pace of each rate limit, per limit and key, of one queue."""

    def __init__(self) -> None:
        self.paused = False
        self.override: tuple[LimitSpec, ...] | None = None
        """Limits set at run time, in place of the declared ones; ``None``: the declared."""
        self._running: defaultdict[tuple[LimitSpec, str], int] = defaultdict(int)
        self._tat: dict[tuple[str, str], float] = {}  # (bucket, key): the next start's time

    def limits(self, declared: Sequence[LimitSpec]) -> tuple[LimitSpec, ...]:
        """The limits in force: ``override`` (else ``declared``), and ``PAUSED`` while
        paused."""
        chosen = tuple(declared) if self.override is None else self.override
        return (*chosen, PAUSED) if self.paused else chosen

    def wait(self, limits: Sequence[LimitSpec], envelope: Envelope, t: float) -> float | None:
        """``None`` when ``envelope`` may start at ``t``; else the seconds until a rate window
        it is held back by has room (``inf``: a concurrency cap, freed by a settle)."""
        longest = None
        for spec, key in _applying(limits, envelope):
            if spec.per is None:
                room = spec.limit - self._running[(spec, key)]
                wait = float("inf")
            else:
                ahead = self._tat.get((spec.bucket, key), t) - t  # seconds ahead of the pace
                room = 1 if ahead <= spec.burst * spec.spacing + 1e-9 else 0
                wait = ahead - spec.burst * spec.spacing
            if room <= 0:
                longest = wait if longest is None else max(longest, wait)
        return longest

    def start(self, limits: Sequence[LimitSpec], envelope: Envelope, t: float) -> Holds:
        """Record that ``envelope`` started at ``t``; returns the shares it holds until
        ``end``."""
        holds: Holds = []
        for spec, key in _applying(limits, envelope):
            if spec.per is None:
                self._running[(spec, key)] += 1
                holds.append((spec, key))
            else:
                tat = self._tat.get((spec.bucket, key), t)
                self._tat[(spec.bucket, key)] = max(tat, t) + spec.spacing
        if len(self._tat) > 1024:  # a key behind its pace is as if never seen: forgotten
            self._tat = {k: v for k, v in self._tat.items() if v > t}
        return holds

    def end(self, holds: Holds) -> None:
        """A row holding ``holds`` settled: its shares are free."""
        for hold in holds:
            self._running[hold] -= 1


def _applying(limits: Sequence[LimitSpec], envelope: Envelope) -> list[tuple[LimitSpec, str]]:
    payload: Any = envelope.payload
    return [
        (spec, spec.key_of(payload))
        for spec in limits
        if spec.job_type is None or spec.job_type == envelope.job_type
    ]
