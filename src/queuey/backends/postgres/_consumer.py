"""The PostgreSQL consumer and delivery.

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
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, TypeVar

from queuey._text import clean_text
from queuey.attempts import AttemptError
from queuey.backends.postgres._acks import LostClaimError, lost_claim
from queuey.backends.postgres._cancel import Cancellations
from queuey.backends.postgres._complete import Completer
from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._pool import Connection
from queuey.backends.postgres._rows import Claim
from queuey.backends.postgres._store import Store
from queuey.backends.postgres._wake import Waker
from queuey.envelope import Envelope
from queuey.errors import BackendError
from queuey.progress import Progress
from queuey.queues import QueueConfig

__all__ = ["ConsumerLinks", "PgConsumer", "PgDelivery", "Slots"]

log = logging.getLogger("queuey.postgres")

T = TypeVar("T")

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


class Slots(Protocol):
    """The worker's handler slots, shared by its consumers (the runtime's ``Slots``)."""

    def take(self, wanted: int) -> int:
        """Hold up to ``wanted`` free slots now; returns how many."""
        ...

    def give(self, count: int = 1) -> None:
        """Free ``count`` slots."""
        ...

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake()`` whenever slots are freed; returns what stops it."""
        ...


class PgDelivery:
    """One claimed row; settling it is fenced by (owner, attempts).

    A handler may complete it inside its own transaction (``transaction()``): the row is then
    done when that transaction commits, and the later ``ack`` only frees the delivery. The
    consumer counts it unsettled until its first settle, whether that lands or not (a refused
    outcome may be followed by a dead letter on the same delivery).
    """

    def __init__(self, consumer: PgConsumer, claim: Claim) -> None:
        self._consumer = consumer
        self._claim = claim
        self._cancel = consumer.cancellations.watch(claim.row_id)
        self._completed = False
        self._settling = False
        self._freed = False
        self.superseded_by: str | None = None
        """Set by a retry or deferral that ended the row cancelled instead: the id of the job
        that took its unique key while it ran."""

    @property
    def envelope(self) -> Envelope:
        return self._claim.envelope

    @property
    def row_id(self) -> str:
        return self._claim.envelope.job_id

    @property
    def waited(self) -> float:
        """Seconds the row was due before it was claimed (the scheduling lag)."""
        return self._claim.waited

    @property
    def cancel_requested(self) -> asyncio.Future[None]:
        """Done when ``cancel`` reached this row while it runs (through the listener or the
        heartbeat), or when its lease was lost (``lease_lost``)."""
        return self._cancel

    @property
    def lease_lost(self) -> bool:
        """Whether this run lost its lease (the heartbeat, or a refused settle, found the row
        no longer held by this process: it may run elsewhere)."""
        return self._consumer.cancellations.is_lost(self.row_id)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """A transaction on a pooled connection in which the handler writes and this run is
        recorded done: both commit together or neither does. The completion is fenced by
        (owner, attempt): if this worker lost its claim (lease expired, job cancelled), the
        transaction is rolled back and ``LostClaimError`` raised.

        Raises:
            LostClaimError: the fence refused the completion; nothing was committed.
            BackendError: the database failed; nothing was committed.
        """
        store = self._consumer.store
        async with store.transaction() as conn:
            yield conn
            if not await store.complete(conn, self.row_id, self._claim.envelope.attempt):
                log.error(
                    "job %s: not completed in the handler's transaction (the claim was lost "
                    "or the job cancelled); the transaction is rolled back",
                    self.row_id,
                )
                raise await self._refusal()
        self._completed = True

    async def _refusal(self) -> LostClaimError:
        """The error of an outcome the fence refused, after asking the row's state (a rare
        path: one query). When this process still holds the run, its cancel was asked for:
        ``cancel_requested`` is completed (whether or not its notification arrived), so the run
        ends as a cancellation rather than a failure to record it. Otherwise the claim was lost
        (its lease expired)."""
        envelope = self._claim.envelope
        try:
            held, cancel = await self._consumer.store.claim_state(self.row_id, envelope.attempt)
        except BackendError:
            held, cancel = False, False  # the fence's answer stands: the claim was lost
        if not (held and cancel):
            return lost_claim(self.row_id)
        if not self._cancel.done():
            self._cancel.set_result(None)
        return LostClaimError(
            f"job {self.row_id} was cancelled while it ran; the outcome was not recorded"
        )

    async def _fenced(self, settle: Awaitable[T]) -> T:
        """Await ``settle``; a refusal by the fence raises ``_refusal()``."""
        try:
            return await settle
        except LostClaimError:
            raise await self._refusal() from None

    def report_progress(self, progress: Progress) -> None:
        """Keep ``progress`` for the next heartbeat, which writes it (the last one wins)."""
        self._consumer.completer.progress[self.row_id] = progress.to_json()

    async def ack(self, result: str | None = None) -> None:
        envelope = self._claim.envelope
        self._begin()
        try:
            if not self._completed:  # _fenced inlined: one coroutine frame less per job
                await self._consumer.completer.ack(envelope.job_id, envelope.attempt, result)
        except LostClaimError:
            raise await self._refusal() from None
        finally:
            self._done()

    async def cancelled(self) -> None:
        """The run whose cancel was asked for has ended: record the row cancelled (fenced)
        and free the slot. A run whose lease was lost records nothing (the row is no longer
        this process's).

        Raises:
            LostClaimError: the lease was lost meanwhile; nothing was recorded.
            BackendError: the database stayed unreachable (the row ends cancelled once its
                lease expires).
        """
        self._check_not_completed()
        self._begin()
        try:
            if not self.lease_lost:
                await self._consumer.completer.finish_cancel(
                    self.row_id, self._claim.envelope.attempt
                )
        finally:
            self._done()

    def _begin(self) -> None:
        """The run has ended and its outcome is being settled: the row no longer counts
        against the prefetch, only against the settles in flight (once)."""
        if not self._settling:
            self._settling = True
            self._consumer.settling()

    def _done(self) -> None:
        self._begin()
        self._consumer.completer.held.discard(self.row_id)
        self._consumer.cancellations.forget(self.row_id)
        if not self._freed:  # once, though a refused outcome may be followed by a dead letter
            self._freed = True
            self._consumer.settled(self)

    def _check_not_completed(self) -> None:
        """Refuse a failure outcome after the handler's transaction recorded success.

        Raises:
            LostClaimError: the job is already done.
        """
        if self._completed:
            self._done()
            raise LostClaimError(
                f"job {self.row_id} was completed in the handler's transaction; the outcome "
                "after it is not recorded"
            )

    async def retry(
        self,
        envelope: Envelope,
        delay: timedelta,
        error: str,
        failure: AttemptError | None = None,
    ) -> None:
        await self._reschedule(envelope, delay, error, failure)

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        await self._reschedule(envelope, delay, None)

    async def _reschedule(
        self,
        envelope: Envelope,
        delay: timedelta,
        error: str | None,
        failure: AttemptError | None = None,
    ) -> None:
        self._check_not_completed()
        self._begin()
        seconds = delay.total_seconds()
        consumer = self._consumer
        try:
            self.superseded_by = await self._fenced(
                consumer.completer.reschedule(
                    self.row_id,
                    self._claim.envelope.attempt,
                    next_attempts=envelope.attempt - 1,
                    deferrals=envelope.deferrals,
                    priority=envelope.priority,
                    delay=seconds,
                    ttl=consumer.ttl,
                    error=None if error is None else clean_text(error),
                    failure=failure_json(failure),
                )
            )
        finally:
            self._done()
        consumer.wake_after(seconds)

    async def dead_letter(self, reason: str, failure: AttemptError | None = None) -> None:
        self._check_not_completed()
        self._begin()
        try:
            await self._fenced(
                self._consumer.completer.dead_letter(
                    self.row_id,
                    self._claim.envelope.attempt,
                    clean_text(reason),
                    failure_json(failure),
                )
            )
        finally:
            self._done()

    async def release(self) -> None:
        self._check_not_completed()
        self._begin()
        try:
            await self._consumer.completer.release(self.row_id, self._claim.envelope.attempt)
        finally:
            self._done()
        self._consumer.poke()


def failure_json(failure: AttemptError | None) -> str | None:
    """``failure`` as the JSON text a settle statement stamps and stores (``None``: none)."""
    return None if failure is None else json.dumps(failure.to_json(), ensure_ascii=False)


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
        self._slots: Slots | None = None
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

    def share_slots(self, slots: Slots) -> None:
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
