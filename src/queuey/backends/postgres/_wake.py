"""Who to wake: the live consumers of one backend, by queue name.

A notification names the queue whose rows were committed (``pg_notify(channel, queue)``), and
only that queue's consumers are woken. The payload is a hint: a woken consumer claims whatever
is due and may find nothing (another worker was faster). Events that may concern any queue (the
LISTEN connection came back, the database recovered, a poll tick, a reclaim, a resumed topic
app's empty payload) wake them all.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Waker", "Wakeable"]


class Wakeable(Protocol):
    """A consumer, as the waker sees it."""

    def poke(self) -> None:
        """Something may be claimable now."""
        ...


class Waker:
    """The live consumers of one backend, by queue name."""

    def __init__(self) -> None:
        self._consumers: dict[str, list[Wakeable]] = {}

    def add(self, queue: str, consumer: Wakeable) -> None:
        """Register ``consumer`` of ``queue``."""
        self._consumers.setdefault(queue, []).append(consumer)

    def remove(self, queue: str, consumer: Wakeable) -> None:
        """Forget a stopped consumer (no-op when unknown)."""
        peers = self._consumers.get(queue, [])
        if consumer in peers:
            peers.remove(consumer)

    def notified(self, queue: str) -> None:
        """A notification named ``queue``: wake its consumers (an empty name: every one, as a
        resumed topic app sends)."""
        if not queue:
            self.wake_all()
        for consumer in self._consumers.get(queue, ()):
            consumer.poke()

    def wake_all(self) -> None:
        """Wake every consumer."""
        for consumers in self._consumers.values():
            for consumer in consumers:
                consumer.poke()
