"""Consumers and deliveries of the memory backend.

A ``MemoryConsumer`` hands out envelopes of one queue, at most ``prefetch`` unsettled, and only
those of its job types when it has any (so several workers may share a queue). Under a worker it
takes an envelope only when the worker has a free handler slot (``share_slots``), holding that
slot, so an envelope never waits taken by a busy worker while another one could run it. Both it
and its ``MemoryDelivery`` objects work on the backend's ``Store``, never on the backend itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from functools import partial

from queuey._waits import first_of
from queuey.attempts import AttemptError
from queuey.backends.base import Delivery, HandlerSlots
from queuey.backends.memory._flow import Holds
from queuey.backends.memory._records import Pending, QueueState, now
from queuey.backends.memory._store import Store
from queuey.envelope import Envelope
from queuey.errors import BackendError
from queuey.limits import LimitSpec, ThrottleTally
from queuey.progress import Progress
from queuey.unique import State

__all__ = ["MemoryConsumer", "MemoryDelivery"]


class MemoryDelivery:
    """One handed-out envelope, settled exactly once.

    Args:
        store: the backend's state.
        queue: the queue the envelope came from.
        envelope: the envelope.
        on_settled: called once, when the delivery is settled.
    """

    def __init__(
        self, store: Store, queue: QueueState, envelope: Envelope, on_settled: Callable[[], None]
    ) -> None:
        self._store = store
        self._queue = queue
        self._envelope = envelope
        self._on_settled = on_settled
        self._settled = False
        self.superseded_by: str | None = None
        """Set by a retry or deferral that ended the job cancelled instead: the id of the job
        that took its unique key while it ran."""
        self._cancel: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        store.running[envelope.job_id] = self._cancel
        record = store.jobs.get(envelope.job_id)
        self.waited = None if record is None else max(0.0, now() - record.due)
        """Seconds the envelope was due before it was handed out (``None``: untracked)."""

    @property
    def envelope(self) -> Envelope:
        """The delivered envelope."""
        return self._envelope

    @property
    def cancel_requested(self) -> asyncio.Future[None]:
        """Done once ``MemoryBackend.cancel`` reached the job while it runs."""
        return self._cancel

    @property
    def lease_lost(self) -> bool:
        """Always false: the memory backend has no leases (its runs end in this process)."""
        return False

    def report_progress(self, progress: Progress) -> None:
        """Keep ``progress`` as the job's last (``MemoryBackend.job(id).progress``)."""
        record = self._store.jobs.get(self._envelope.job_id)
        if record is not None:
            record.progress = progress

    async def ack(self, result: str | None = None) -> None:
        """Record success (``acked(q)``), with ``result`` (JSON text) when given.

        Raises:
            BackendError: the job was cancelled meanwhile; the success is not recorded.
        """
        self._settle()
        self._queue.acked.append(self._envelope)
        self._moved("done")
        self._store.track(self._envelope, "done", ran=True, result=result)

    async def cancelled(self) -> None:
        """Free the delivery of a job cancelled while it ran (it is in ``cancelled(q)``)."""
        self._settle(cancelling=True)

    async def retry(
        self,
        envelope: Envelope,
        delay: timedelta,
        error: str,
        failure: AttemptError | None = None,
    ) -> None:
        """Replace this delivery by ``envelope``, deliverable after ``delay``; ``error`` is kept
        as the job's last error, ``failure`` added to its attempt errors."""
        self._store.check_open()
        self._settle()
        self._queue.acked.append(self._envelope)
        self.superseded_by = self._store.superseded(self._queue, envelope)
        if self.superseded_by is not None:
            return
        self._store.publish([envelope], delay)
        self._store.track(envelope, "pending", ran=False, error=error, failure=failure)

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Replace this delivery by ``envelope``, held for ``delay``."""
        self._store.check_open()
        self._settle()
        self._queue.acked.append(self._envelope)
        self.superseded_by = self._store.superseded(self._queue, envelope)
        if self.superseded_by is None:
            self._store.defer(envelope, delay)

    async def dead_letter(self, reason: str, failure: AttemptError | None = None) -> None:
        """Move the envelope to the dead letters with ``reason`` (``failure``: as for
        ``retry``)."""
        self._store.check_open()
        self._settle()
        self._queue.dead.append((self._envelope, reason))
        self._moved("failed")
        self._store.track(self._envelope, "failed", ran=True, error=reason, failure=failure)

    async def release(self) -> None:
        """Put the envelope back in its queue untouched."""
        self._settle()
        if self._store.superseded(self._queue, self._envelope) is None:
            self._store.insert(self._envelope)

    def _moved(self, state: State) -> None:
        """The job ended in ``state``; a debounced successor waiting behind it may run now."""
        if self._store.keys.moved(self._envelope.job_id, state):
            self._queue.changed.set()

    def _settle(self, *, cancelling: bool = False) -> None:
        if self._settled:
            raise BackendError(f"delivery of job {self._envelope.job_id} already settled")
        self._settled = True
        self._store.running.pop(self._envelope.job_id, None)
        self._on_settled()
        if self._cancel.done():
            self._queue.cancelled.append(self._envelope)
            self._store.keys.release(self._envelope.job_id)
            self._queue.changed.set()
            self._store.track(self._envelope, "cancelled", ran=True)
        if self._cancel.done() and not cancelling:
            raise BackendError(
                f"job {self._envelope.job_id} was cancelled while it ran; "
                "its outcome is not recorded"
            )


class MemoryConsumer:
    """Deliveries of one queue, at most ``prefetch`` unsettled.

    Args:
        store: the backend's state.
        queue: the queue to consume.
        prefetch: how many deliveries may be out at once.
        job_types: hand out only these job types (``None``: every one).
        limits: the flow limits of the queue and its job types (``queuey.limits``): a job is
            handed out only while each has room for its key; otherwise the consumer sleeps
            until the next one may start.
        tally: where to count what the limits held back (``ThrottleTally``).
    """

    def __init__(
        self,
        store: Store,
        queue: QueueState,
        prefetch: int,
        job_types: tuple[str, ...] | None = None,
        limits: tuple[LimitSpec, ...] = (),
        tally: ThrottleTally | None = None,
    ) -> None:
        self._store = store
        self._limits = limits
        self._tally = tally
        self._timer: asyncio.TimerHandle | None = None
        self._job_types = None if job_types is None else frozenset(job_types)
        self._queue = queue
        self._slots = prefetch
        self._stopped = False
        self._wake = asyncio.Event()
        self._shared: HandlerSlots | None = None
        self._unwatch: Callable[[], None] | None = None

    def share_slots(self, slots: HandlerSlots) -> None:
        """Take an envelope only while ``slots`` has a free one, and hold it for the delivery
        (the worker frees it when the run ends)."""
        self._shared = slots
        self._unwatch = slots.watch(self._wake.set)

    async def next(self) -> Delivery | None:
        """The next delivery; ``None`` once stopped or the backend is closed."""
        store = self._store
        shared = self._shared
        while not self._stopped and not store.closed:
            room = self._slots > 0 and (shared is None or shared.free > 0)
            envelope = self._take() if room else None
            if envelope is not None:
                if shared is not None:
                    shared.take(1)
                self._slots -= 1
                store.handed_out(envelope)
                store.track(envelope, "running", ran=True)
                holds = self._queue.flow.start(self._in_force(), envelope, now())
                release = partial(self._release, holds)
                return MemoryDelivery(store, self._queue, envelope, release)
            await self._wait()
        return None

    async def stop(self) -> None:
        """Hand out nothing more; ``next`` returns ``None``."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        if self._unwatch is not None:
            self._unwatch()
        self._wake.set()

    def _release(self, holds: Holds) -> None:
        self._slots += 1
        self._store.settled()
        self._wake.set()
        if holds:  # another consumer of the queue may be waiting for these shares
            self._queue.flow.end(holds)
            self._queue.changed.set()

    def _take(self) -> Envelope | None:
        wanted = self._job_types
        pending = self._queue.pending
        index = 0
        soonest: float | None = None  # when a job held back by a rate window may start
        held = {"concurrency": 0, "rate": 0}
        limits = self._in_force()
        aging = self._queue.config.priority_aging
        if aging is not None and not limits:  # as PostgreSQL: limits keep strict priority
            pending.sort(key=partial(_rank, aging, self._queue.config.max_priority, now()))
        while index < len(pending):
            item = pending[index]
            if item.expires_at is not None and now() > item.expires_at:
                del pending[index]
                self._store.keys.moved(item.envelope.job_id, "failed")
                self._store.expire(self._queue, item.envelope)
            elif (
                wanted is None or item.envelope.job_type in wanted
            ) and not self._store.keys.held_back(item.envelope.job_id):
                wait = self._queue.flow.wait(limits, item.envelope, now())
                if wait is None:
                    del pending[index]
                    self._count(held)
                    return item.envelope
                held["concurrency" if wait == float("inf") else "rate"] += 1
                soonest = wait if soonest is None else min(soonest, wait)
                index += 1  # its key is full under a flow limit: it is not taken yet
            else:
                index += 1  # another consumer's job type, or a successor waiting: leave it
        if soonest is not None and soonest != float("inf"):
            self._wake_after(soonest)
        self._count(held)
        return None

    def _in_force(self) -> tuple[LimitSpec, ...]:
        """This queue's limits now: the declared or those set at run time, a pause's zero."""
        return self._queue.flow.limits(self._limits)

    def _count(self, held: dict[str, int]) -> None:
        """Tell the tally what this look at the queue held back, per limit kind the queue has
        (a row held back by both kinds counts as held by its concurrency cap)."""
        limits = [spec for spec in self._in_force() if spec.limit > 0]  # not a pause's zero
        if self._tally is None or not limits:
            return
        kinds = {"concurrency" if spec.per is None else "rate" for spec in limits}
        for kind in sorted(kinds):
            self._tally.record(self._queue.config.name, kind, held[kind])

    def _wake_after(self, seconds: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(max(seconds, 0.0), self._wake.set)

    async def _wait(self) -> None:
        self._queue.changed.clear()
        self._wake.clear()
        await first_of(self._queue.changed.wait(), self._wake.wait())


def _rank(aging: float, top: int, t: float, item: Pending) -> tuple[int, float]:
    """The sort key of a pending envelope under priority aging (first first): its priority
    plus one per ``aging`` seconds due, at most ``top`` (highest first), then since when it is
    due (a stable sort keeps the insertion order of equal times), as PostgreSQL's claim_aged."""
    return -min(item.envelope.priority + int((t - item.since) // aging), top), item.since
