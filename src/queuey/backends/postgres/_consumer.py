"""The PostgreSQL consumer and delivery.

A consumer claims up to ``prefetch - unsettled`` rows of its queue in one statement
(``FOR UPDATE SKIP LOCKED``), at most half the prefetch at a time so that the next claim overlaps
the handlers of the previous one, hands them out one by one, and claims again while claims come
back full (drain: notifications coalesce). It waits for a notification, the poll interval, or
the next due row, whichever comes first; when that row falls due is asked only after what a
short claim brought has been handed out, so that round trip never delays a delivery. Acks go
through the backend's ``AckBatch``, many per statement. Database errors never escape ``next``:
they are logged once per outage and the consumer retries, so a database restart costs latency,
not the worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from queuey._outcome import clean_text
from queuey.envelope import Envelope
from queuey.queues import QueueConfig

if TYPE_CHECKING:
    from queuey.backends.postgres._backend import PostgresBackend

__all__ = ["PgConsumer", "PgDelivery"]

log = logging.getLogger("queuey.postgres")


class PgDelivery:
    """One claimed row; settling it is fenced by (owner, attempts)."""

    def __init__(self, consumer: PgConsumer, row_id: str, envelope: Envelope) -> None:
        self._consumer = consumer
        self.row_id = row_id
        self._envelope = envelope

    @property
    def envelope(self) -> Envelope:
        return self._envelope

    def _fence(self) -> dict[str, Any]:
        backend = self._consumer.backend
        return {"id": self.row_id, "owner": backend.owner, "attempts": self._envelope.attempt}

    async def _settle(self, name: str, params: dict[str, Any]) -> None:
        try:
            await self._consumer.backend.settle(name, {**self._fence(), **params}, self.row_id)
        finally:
            self._consumer.settled(self)

    async def ack(self) -> None:
        try:
            await self._consumer.backend.ack(self.row_id, self._envelope.attempt)
        finally:
            self._consumer.settled(self)

    async def retry(self, envelope: Envelope, delay: timedelta, error: str) -> None:
        await self._reschedule(envelope, delay, error)

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        await self._reschedule(envelope, delay, None)

    async def _reschedule(self, envelope: Envelope, delay: timedelta, error: str | None) -> None:
        seconds = delay.total_seconds()
        await self._settle(
            "reschedule",
            {
                "next_attempts": envelope.attempt - 1,
                "deferrals": envelope.deferrals,
                "priority": envelope.priority,
                "delay": seconds,
                "ttl": self._consumer.ttl,
                "error": None if error is None else truncate(error),
            },
        )
        self._consumer.wake_after(seconds)

    async def dead_letter(self, reason: str) -> None:
        await self._settle("dead_letter", {"reason": truncate(reason)})

    async def release(self) -> None:
        await self._settle("release", {})
        self._consumer.poke()


def truncate(text: str) -> str:
    """``text`` made storable in a ``text`` column (no NUL, no lone surrogate) and cut to 4000
    UTF-8 bytes with "…" (seed ``000``, SEEDS-DIGEST §1.8)."""
    return clean_text(text)


class PgConsumer:
    """Claims and hands out rows of one queue."""

    def __init__(self, backend: PostgresBackend, config: QueueConfig) -> None:
        self.backend = backend
        self.config = config
        self.ttl = None if config.message_ttl is None else config.message_ttl.total_seconds()
        self._buffer: deque[PgDelivery] = deque()
        self._unsettled = 0
        self._maybe_more = True
        self._pokes = 0
        self._stopped = False
        self._event = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._suspect: PgDelivery | None = None
        self._due_unknown = False
        # Half the prefetch per claim: the next claim is on the wire while the handlers of the
        # previous one run, so the database and the handlers overlap instead of taking turns.
        self._claim_batch = max(1, config.prefetch // 2)

    def poke(self) -> None:
        """Something may be claimable now (a notification, the poll, a due row)."""
        self._pokes += 1
        self._maybe_more = True
        self._event.set()

    def wake_after(self, seconds: float) -> None:
        """Claim again in ``seconds`` (a retry or deferral this process scheduled)."""
        loop = asyncio.get_running_loop()
        when = loop.time() + max(seconds, 0.0)
        if self._timer is not None and self._timer.when() <= when:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._due)

    def _due(self) -> None:
        self._timer = None
        self.poke()

    def settled(self, delivery: PgDelivery) -> None:
        """A delivery of this consumer was settled: a slot is free."""
        self._unsettled -= 1
        if delivery is self._suspect:
            self._suspect = None
            self._maybe_more = True
        if self._maybe_more:
            self._event.set()

    async def next(self) -> PgDelivery | None:
        while True:
            if self._buffer:
                return self._buffer.popleft()
            if self._stopped:
                return None
            free = self.config.prefetch - self._unsettled
            if self._maybe_more and free > 0 and self._suspect is None:
                await self._claim(min(free, self._claim_batch))
                continue
            if self._due_unknown:
                await self._schedule_due()
                continue
            await self._wait()

    async def _claim(self, limit: int) -> None:
        self._event.clear()
        pokes = self._pokes
        rows = await self.backend.claim(self.config, limit)
        if rows is None:  # the database is down: retry soon, or on reconnect
            self._maybe_more = self._pokes != pokes
            self.wake_after(min(1.0, self.backend.poll_interval))
            return
        self._unsettled += len(rows)
        for row_id, envelope, suspect in rows:
            delivery = PgDelivery(self, row_id, envelope)
            self._buffer.append(delivery)
            if suspect:  # it may kill this process: claim nothing more until it settles
                self._suspect = delivery
        if len(rows) < limit:
            # A notification that arrived during the claim may be for a row it did not see.
            self._maybe_more = self._pokes != pokes
            # When the next row falls due is asked only once what was claimed is handed out:
            # the round trip then overlaps the handlers instead of delaying them.
            self._due_unknown = True

    async def _schedule_due(self) -> None:
        self._due_unknown = False
        due = await self.backend.next_due(self.config)
        if due is not None:
            self.wake_after(due)

    async def _wait(self) -> None:
        try:
            await asyncio.wait_for(self._event.wait(), self.backend.poll_interval)
        except TimeoutError:
            self._maybe_more = True
        self._event.clear()

    async def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        self._event.set()
        self.backend.unregister(self)
