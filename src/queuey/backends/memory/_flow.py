"""Flow limits on the memory backend: what each key of a queue holds (rows running, recent
starts), on the event loop's clock (virtual under looptime).

The same rules as the PostgreSQL claim: a row is handed out only while every limit that
applies to it (its queue's, its job type's) has room for its key; a concurrency share is held
from hand-out to settle, a start stays in a rate window for ``per`` seconds. Rows are handed out
in queue order (the first that may start), not round robin across keys.

A pause is the limit zero (``PAUSED``) held beside the queue's limits, and limits set at run
time (``MemoryBackend.set_limits``) replace the declared ones until reset: every consumer of the
queue asks ``limits`` at each look, so both take effect at once.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from typing import Any

from queuey.envelope import Envelope
from queuey.limits import PAUSED, LimitSpec

__all__ = ["Flow", "Holds"]

Holds = list[tuple[LimitSpec, str]]
"""The concurrency shares a handed-out row holds (its limits and keys)."""


class Flow:
    """Running rows and recent starts per limit and key, of one queue."""

    def __init__(self) -> None:
        self.paused = False
        self.override: tuple[LimitSpec, ...] | None = None
        """Limits set at run time, in place of the declared ones; ``None``: the declared."""
        self._running: defaultdict[tuple[LimitSpec, str], int] = defaultdict(int)
        self._starts: defaultdict[tuple[str, str], deque[float]] = defaultdict(deque)

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
                starts = self._starts[(spec.ledger, key)]
                inside = [s for s in starts if s > t - spec.per]
                room = spec.limit - len(inside)
                wait = inside[0] + spec.per - t if inside else 0.0
            if room <= 0:
                longest = wait if longest is None else max(longest, wait)
        return longest

    def start(self, limits: Sequence[LimitSpec], envelope: Envelope, t: float) -> Holds:
        """Record that ``envelope`` started at ``t``; returns the shares it holds until
        ``end``."""
        holds: Holds = []
        horizon = max((spec.per for spec in limits if spec.per is not None), default=0.0)
        ledgers = set()
        for spec, key in _applying(limits, envelope):
            if spec.per is None:
                self._running[(spec, key)] += 1
                holds.append((spec, key))
            elif (spec.ledger, key) not in ledgers:  # the windows of one key share a ledger
                ledgers.add((spec.ledger, key))
                starts = self._starts[(spec.ledger, key)]
                starts.append(t)
                while starts and starts[0] <= t - horizon:
                    starts.popleft()
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
