"""The PostgreSQL delivery: one claimed row, settled once, every settle fenced by (owner,
attempts) through the backend's ``Completer``. A handler may complete it inside its own
transaction (``transaction()``), learn that its job was cancelled while it runs
(``cancel_requested``) or that its lease was lost (``lease_lost``).

A delivery depends on the consumer that claimed it only through ``DeliveryHost``: its store,
completer and cancellations, and the calls that tell it a delivery is settling or settled, or
that a row may be claimable (``_consumer``)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Protocol, TypeVar

from queuey._text import clean_text
from queuey.attempts import AttemptError
from queuey.backends.postgres._acks import LostClaimError, lost_claim
from queuey.backends.postgres._cancel import Cancellations
from queuey.backends.postgres._complete import Completer
from queuey.backends.postgres._pool import Connection
from queuey.backends.postgres._rows import Claim
from queuey.backends.postgres._store import Store
from queuey.backends.steps import WORKFLOW_HEADER
from queuey.envelope import Envelope
from queuey.errors import BackendError
from queuey.progress import Progress

__all__ = ["DeliveryHost", "PgDelivery", "failure_json"]

log = logging.getLogger("queuey.postgres")

T = TypeVar("T")


class DeliveryHost(Protocol):
    """The consumer that claimed a delivery, as the delivery sees it (``PgConsumer``).

    Attributes:
        store: where the handler's transaction and the claim state are read.
        completer: where outcomes are recorded.
        cancellations: where the delivery learns that its job was cancelled while it runs.
        ttl: the queue's message TTL (seconds; ``None`` for none), carried by a reschedule.
    """

    store: Store
    completer: Completer
    cancellations: Cancellations
    ttl: float | None

    def settling(self) -> None:
        """A delivery's run has ended and its outcome is being recorded."""
        ...

    def settled(self, delivery: PgDelivery) -> None:
        """A delivery was settled: a slot is free."""
        ...

    def wake_after(self, seconds: float) -> None:
        """Claim again in ``seconds`` (a row falls due then)."""
        ...

    def poke(self) -> None:
        """Something may be claimable now."""
        ...


class PgDelivery:
    """One claimed row; settling it is fenced by (owner, attempts).

    A handler may complete it inside its own transaction (``transaction()``): the row is then
    done when that transaction commits, and the later ``ack`` only frees the delivery. The
    consumer counts it unsettled until its first settle, whether that lands or not (a refused
    outcome may be followed by a dead letter on the same delivery).
    """

    def __init__(self, consumer: DeliveryHost, claim: Claim) -> None:
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
                feeds = WORKFLOW_HEADER in envelope.headers  # steps may wait on it
                await self._consumer.completer.ack(envelope.job_id, envelope.attempt, result, feeds)
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
