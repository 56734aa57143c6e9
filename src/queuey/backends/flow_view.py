"""What the flow limits of each queue hold back now, as the dashboard's Flow limits page shows
it (``DashboardStore.flow_view``): per queue, the limits in force and where they come from, and
per limit and key the due jobs waiting, the jobs running against a cap, the starts it may make
now, the jobs it holds back and when its next start may be."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["FlowKey", "FlowQueue", "LimitsSet"]


@dataclass(frozen=True)
class FlowKey:
    """One key of one limit of a queue, among the oldest 200 due jobs (as a claim sees them).

    Attributes:
        n: the limit's position in the queue's limits (``FlowQueue.labels[n]``).
        key: the key: its ``by`` fields' values as a JSON array (``[]``: the whole queue).
        capped: a concurrency cap (else a rate limit).
        cap: the cap, or the rate limit's starts per window.
        waiting: due jobs of this key among those the claim considers.
        running: jobs of this key running now (a cap; ``None`` for a rate limit).
        room: starts the limit allows this key now.
        held: due jobs of this key the limit holds back now.
        next_in: seconds until the rate limit allows this key's next start (``None``: it has
            room now, or a cap: a start waits for a running job to end).
    """

    n: int
    key: str
    capped: bool
    cap: int
    waiting: int
    running: int | None
    room: int
    held: int
    next_in: float | None


@dataclass(frozen=True)
class FlowQueue:
    """A queue with flow limits: declared by its workers, or set at run time.

    Attributes:
        kind: ``job`` or ``topic``.
        queue: its name.
        shown: the limits in force, spelt as ``queuey.limits.parse_limit`` reads them.
        source: ``declared`` (by the workers' code) or ``set`` (at run time, in their place).
        paused: paused (its limit zero): nothing of it starts, whatever the limits say.
        keys: per limit and key what it holds back, keys holding jobs back first.
    """

    kind: str
    queue: str
    shown: str
    source: str
    paused: bool
    keys: tuple[FlowKey, ...] = ()

    @property
    def labels(self) -> list[str]:
        """Each limit's spelling, by its position ``n``."""
        return self.shown.split("; ") if self.shown not in ("", "none") else []

    @property
    def held(self) -> int:
        """Due jobs the limits hold back now (a job held by two limits counts twice)."""
        return sum(key.held for key in self.keys)


@dataclass(frozen=True)
class LimitsSet:
    """A queue (kind ``job``/``topic``) whose flow limits ``set_by`` set at ``set_at``, in place
    of the declared ones: ``shown``, spelt as ``queuey.limits.parse_limit`` reads them."""

    kind: str
    queue: str
    shown: str
    set_by: str
    set_at: datetime
