"""Counting outcomes: ``QueueStats`` (one queue's counters, one per ``OutcomeKind``) and the
``Stats`` middleware that keeps them per queue, with the last dead letters."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from queuey._outcome import Outcome, OutcomeKind
from queuey._runtime.middleware import Middleware
from queuey.backends.base import Delivery
from queuey.envelope import Envelope

__all__ = ["QueueStats", "Stats"]


@dataclass
class QueueStats:
    """Outcomes a worker observed on one queue.

    ``acked`` counts deliveries that ended in an ack, a retry or a deferral (each hands its
    delivery back to the backend, which counts it as acked).
    """

    succeeded: int = 0
    retried: int = 0
    deferred: int = 0
    dead: int = 0
    cancelled: int = 0
    lease_lost: int = 0

    @property
    def acked(self) -> int:
        """Successes + retries + deferrals."""
        return self.succeeded + self.retried + self.deferred

    def count(self, kind: OutcomeKind) -> None:
        """Add one outcome of ``kind``."""
        match kind:
            case OutcomeKind.SUCCEEDED:
                self.succeeded += 1
            case OutcomeKind.RETRIED:
                self.retried += 1
            case OutcomeKind.DEFERRED:
                self.deferred += 1
            case OutcomeKind.DEAD:
                self.dead += 1
            case OutcomeKind.CANCELLED:
                self.cancelled += 1
            case OutcomeKind.LEASE_LOST:
                self.lease_lost += 1


QueueStats.__module__ = "queuey.worker"  # its public home, as before the runtime split


class Stats(Middleware):
    """Counts each recorded outcome per queue (the envelope's ``queue``), and keeps the last
    ``keep`` dead letters as ``(envelope, reason)``.

    Args:
        queues: the names counted from the start (others are added when first seen).
        keep: how many dead letters to keep (the oldest are dropped).

    Attributes:
        queues: per queue name, its ``QueueStats``.
        dead_letters: the last ``keep`` ``(envelope, reason)`` pairs, oldest first.
    """

    def __init__(self, queues: Iterable[str], keep: int = 100) -> None:
        self.queues: dict[str, QueueStats] = {name: QueueStats() for name in queues}
        self.dead_letters: deque[tuple[Envelope, str]] = deque(maxlen=keep)

    def on_outcome(self, delivery: Delivery, outcome: Outcome) -> None:
        """Count ``outcome``; keep it if it is a dead letter."""
        envelope = delivery.envelope
        stats = self.queues.get(envelope.queue)
        if stats is None:
            stats = self.queues[envelope.queue] = QueueStats()
        stats.count(outcome.kind)
        if outcome.kind is OutcomeKind.DEAD:
            self.dead_letters.append((envelope, outcome.text))
