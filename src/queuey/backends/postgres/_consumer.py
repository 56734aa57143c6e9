"""The PostgreSQL consumer (the rows it hands out are ``_delivery.PgDelivery``).

A consumer claims up to ``prefetch - unsettled`` rows of its queue in one statement
(``FOR UPDATE SKIP LOCKED``; a row is unsettled until its run ends, and one whose outcome is
being recorded counts apart, up to another ``prefetch``, so the next claim never waits for an
ack statement to land), at most half the prefetch at a time so that the next claim overlaps
the handlers of the previous one, hands them out one by one, and claims again while claims come
back full (drain: notifications coalesce). Under a worker it also claims no more rows than the
worker has free handler slots (``share_slots``): it takes the slots before the claim and gives
back those the claim did not fill, so every row it claims is handed to a handler at once. A row
is never claimed to wait in this process behind a slow job (while another worker idles), and a
worker that dies holds only rows it had started, the only ones charged a lost lease.

It waits for a notification, the poll interval, or the next due row, whichever comes first;
a short claim says when that row falls due in the same statement, so a wake-up costs one round
trip. Outcomes go through the backend's ``Completer`` (acks many per statement). Database
errors never escape ``next``: they are logged once per outage and the consumer retries, so a
database restart costs latency, not the worker.

A consumer depends on the store, the completer, the waker and the outage record it is given
(``ConsumerLinks``), never on the backend.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from queuey.backends.base import HandlerSlots
from queuey.backends.postgres._cancel import Cancellations
from queuey.backends.postgres._complete import Completer
from queuey.backends.postgres._delivery import PgDelivery
from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._store import Store
from queuey.backends.postgres._wake import Waker
from queuey.queues import QueueConfig

__all__ = ["ConsumerLinks", "PgConsumer", "PgDelivery"]

"""Error texts and reasons are kept to this many UTF-8 bytes."""


@dataclass(frozen=True)
class ConsumerLinks:
    """What every consumer of one backend shares.

    Attributes:
        store: claims and due times.
        completer: settles (acks batched).
        waker: where a consumer is registered to be woken.
        outage: where claim failures are recorded (logged once per outage).
        poll_interval: the safety-net poll (seconds).
        cancellations: where a delivery learns that its job was cancelled while it runs.
    """

    store: Store
    completer: Completer
    waker: Waker
    outage: Outage
    poll_interval: float
    cancellations: Cancellations


class PgConsumer:
    """Claims and hands out rows of one queue."""

    def __init__(self, config: QueueConfig, links: ConsumerLinks) -> None:
        self.config = config
        self.completer = links.completer
        self.store = links.store
        self.cancellations = links.cancellations
        self._links = links
        self.ttl = None if config.message_ttl is None else config.message_ttl.total_seconds()
        self._buffer: deque[PgDelivery] = deque()
        self._unsettled = 0  # claimed rows whose run has not ended
        self._settling = 0  # rows whose outcome is being recorded
        self._maybe_more = True
        self._pokes = 0
        self._stopped = False
        self._event = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._suspect: PgDelivery | None = None
        self._slots: HandlerSlots | None = None
        self._unwatch: Callable[[], None] | None = None
        # Half the prefetch per claim: the next claim is on the wire while the handlers of the
        # previous one run, so the database and the handlers overlap instead of taking turns.
        self._claim_batch = max(1, config.prefetch // 2)
        if config.limits:  # claims of a limited queue take turns: each takes what it may
            self._claim_batch = config.prefetch
        # Under a concurrency cap, a run ending here may give a held-back row its turn.
        self._capped = any(spec.per is None for spec in config.limits)

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

    def share_slots(self, slots: HandlerSlots) -> None:
        """Claim only for free ``slots`` from now on: each delivery handed out holds one,
        which the worker frees when its run ends."""
        self._slots = slots
        self._unwatch = slots.watch(self._slot_freed)

    def _slot_freed(self) -> None:
        if self._maybe_more:
            self._event.set()

    def settling(self) -> None:
        """A delivery's run has ended and its outcome is being recorded: it no longer counts
        against the prefetch, so the next claim need not wait for that statement (an ack in
        flight) to land."""
        self._unsettled -= 1
        self._settling += 1
        if self._maybe_more:
            self._event.set()

    def settled(self, delivery: PgDelivery) -> None:
        """A delivery of this consumer was settled: a slot is free."""
        self._settling -= 1
        if delivery is self._suspect or self._capped:
            self._suspect = None if delivery is self._suspect else self._suspect
            self._maybe_more = True
        if self._maybe_more:
            self._event.set()

    async def next(self) -> PgDelivery | None:
        while True:
            if self._buffer:
                return self._buffer.popleft()
            if self._stopped:
                return None
            # At most ``prefetch`` rows whose run has not ended, and at most ``prefetch``
            # more whose outcome is still being recorded (a database slow to take acks holds
            # back the claims instead of piling settles up).
            free = self.config.prefetch - max(self._unsettled, self._settling)
            if self._maybe_more and free > 0 and self._suspect is None:
                if await self._claim_for_slots(min(free, self._claim_batch)):
                    continue
            await self._wait()

    async def _claim_for_slots(self, limit: int) -> bool:
        """Claim up to ``limit`` rows, no more than the free slots (taken first, those the
        claim did not fill given back); false when no slot is free (nothing was claimed)."""
        slots = self._slots
        if slots is None:
            await self._claim(limit)
            return True
        taken = slots.take(limit)
        if not taken:
            return False
        claimed = 0
        try:
            claimed = await self._claim(taken)
        finally:
            if taken > claimed:
                slots.give(taken - claimed)
        return True

    async def _claim(self, limit: int) -> int:
        self._event.clear()
        pokes = self._pokes
        links = self._links
        claimed = await links.outage.attempt(links.store.claim(self.config, limit))
        if claimed is None:  # the database is down: retry soon, or on reconnect
            self._maybe_more = self._pokes != pokes
            self.wake_after(min(1.0, links.poll_interval))
            return 0
        claims = claimed.claims
        self._unsettled += len(claims)
        self.completer.hold([claim.envelope.job_id for claim in claims])
        for claim in claims:
            delivery = PgDelivery(self, claim)
            self._buffer.append(delivery)
            if claim.envelope.redeliveries:  # it may kill this process: claim nothing more
                self._suspect = delivery  # until it settles
        if len(claims) < limit:
            # A notification that arrived during the claim may be for a row it did not see.
            self._maybe_more = self._pokes != pokes
            if claimed.due_in is not None:
                self.wake_after(claimed.due_in)
        return len(claims)

    async def _wait(self) -> None:
        try:
            await asyncio.wait_for(self._event.wait(), self._links.poll_interval)
        except TimeoutError:
            self._maybe_more = True
        self._event.clear()

    async def stop(self) -> None:
        self._stopped = True
        if self._unwatch is not None:
            self._unwatch()
        if self._timer is not None:
            self._timer.cancel()
        self._event.set()
        self._links.waker.remove(self.config.name, self)
