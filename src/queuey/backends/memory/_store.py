"""``Store``: the memory backend's state and the operations on it (its records are in
``_records``), shared by the backend, its consumers and their deliveries (and by every copy of
a backend). Per queue, keyed by (kind, name): the pending envelopes in delivery order, counters
of those waiting on a timer, and the acknowledged and dead-lettered ones. Timers run on the
event loop's clock (``call_later``): a virtual-time loop lets delays pass in no wall time. An
envelope goes behind every pending one of equal or higher priority, ahead of the rest. Per job
id, the latest state answers ``job``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

from queuey.attempts import MAX_ATTEMPT_ERRORS, AttemptError
from queuey.backends._runs import OpenRuns
from queuey.backends.base import CancelResult, JobEnd, JobState, QueueDepth
from queuey.backends.memory._batch_counts import Batches
from queuey.backends.memory._ends import TERMINAL, Ends
from queuey.backends.memory._keys import Keys, WallClock, superseded
from queuey.backends.memory._records import (
    WORKER,
    JobRecord,
    Pending,
    QueueState,
    Timer,
    Waiting,
    now,
)
from queuey.backends.memory._steps import Steps
from queuey.envelope import Envelope, Kind
from queuey.errors import ShutDownError
from queuey.queues import QueueConfig
from queuey.unique import EnqueueResult, UniqueKey

log = logging.getLogger("queuey.memory")

__all__ = ["Store"]


class Store:
    """Every queue of one memory backend, its timers, and how many deliveries are out."""

    def __init__(self, start: datetime | None = None) -> None:
        self.queues: dict[tuple[Kind, str], QueueState] = {}
        self.jobs: dict[str, JobRecord] = {}
        self.closed = False
        self.keys = Keys()
        self.clock = WallClock(start)
        self._timers: dict[str, Waiting] = {}
        self.running: dict[str, asyncio.Future[None]] = {}  # job id -> its cancel request
        self.open_runs = OpenRuns("MemoryBackend")  # what close waits for (RunKeeper)
        self.ends = Ends()
        self.steps, self.batches = Steps(), Batches()  # workflow steps waiting; batches' counts
        self._in_flight = 0
        self._activity = asyncio.Event()

    def queue(self, name: str, kind: Kind = "job") -> QueueState:
        """Queue ``name`` of ``kind``, created with default settings if never declared."""
        state = self.queues.get((kind, name))
        if state is None:
            state = self.queues[(kind, name)] = QueueState(QueueConfig(name, kind=kind))
        return state

    def declare(self, config: QueueConfig) -> None:
        """Create the queue of ``config`` unless it exists (the first config of a name wins)."""
        if (config.kind, config.name) not in self.queues:
            self.queues[(config.kind, config.name)] = QueueState(config)

    def track(
        self,
        envelope: Envelope,
        state: JobState,
        *,
        ran: bool,
        due: float | None = None,
        error: str = "",
        result: str | None = None,
        failure: AttemptError | None = None,
    ) -> None:
        """Record ``envelope``'s job now in ``state``: ``ran``: its attempt was started (else
        one run fewer); ``due``: when due (loop time; default as before, or now); ``error``: its
        last error unless empty; ``result``: a success's JSON text; ``failure``: added to its
        attempt errors (stamped, the latest ``MAX_ATTEMPT_ERRORS`` kept). Once ended: wakes."""
        old = self.jobs.get(envelope.job_id)
        when = due if due is not None else (old.due if old is not None else now())
        last = error or (old.last_error if old is not None else None)
        errors = () if old is None else old.errors
        if failure is not None:
            at = datetime.fromtimestamp(self.clock.epoch(), UTC)
            errors = (*errors, failure.stamped(at, WORKER))[-MAX_ATTEMPT_ERRORS:]
        attempts = envelope.attempt if ran else envelope.attempt - 1
        progress = None if old is None else old.progress
        record = JobRecord(envelope, state, attempts, when, last, result, progress, errors)
        self.jobs[envelope.job_id] = record
        if state in TERMINAL:
            self.ends.ended(envelope.job_id, JobEnd(state, last, result))
            self.steps.job_ended(envelope.job_id, state, result, last)
            self.batches.job_ended(envelope.job_id, state)

    def depth(self, queue: QueueState) -> QueueDepth | None:
        """``queue``'s live envelopes counted (``None`` when it has none); the oldest due
        one's wait is on the event loop's clock."""
        config = queue.config
        counts = (len(queue.pending), queue.delayed, queue.held, len(queue.dead))
        waiting = sum(
            1
            for record in self.jobs.values()
            if record.state == "waiting"
            and record.envelope.queue == config.name
            and record.envelope.kind == config.kind
        )
        if not any(counts) and not waiting:
            return None
        dues = [
            self.jobs[p.envelope.job_id].due
            for p in queue.pending
            if p.envelope.job_id in self.jobs
        ]
        oldest = max(0.0, now() - min(dues)) if dues else None
        return QueueDepth(
            config.kind, config.name, *counts, oldest_pending_secs=oldest, waiting=waiting
        )

    def check_open(self) -> None:
        """Raises:
        ShutDownError: the backend was closed.
        """
        if self.closed:
            raise ShutDownError("backend is shut down")

    # -- making envelopes deliverable ---------------------------------------------------------

    def publish(self, envelopes: Sequence[Envelope], delay: timedelta | None) -> None:
        """Make ``envelopes`` deliverable after ``delay`` (``None`` or zero = now)."""
        for envelope in envelopes:
            if delay and delay > timedelta(0):
                self._later(delay, envelope, "delayed")
            else:
                self.insert(envelope)

    def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Hold ``envelope`` for ``delay`` (counted as ``held``), then make it deliverable."""
        if delay > timedelta(0):
            self._later(delay, envelope, "held")
        else:
            self.insert(envelope)

    def insert(self, envelope: Envelope) -> None:
        """Make ``envelope`` deliverable now, at its priority (dropped once closed)."""
        if self.closed:
            return
        queue = self.queue(envelope.queue, envelope.kind)
        if envelope.kind == "topic" and not envelope.job_type:
            queue.acked.append(envelope)  # nobody subscribes: recorded as handled
            self.track(envelope, "done", ran=False, due=now())
            return
        self.track(envelope, "pending", ran=False, due=now())
        ttl = queue.config.message_ttl
        expires = None if ttl is None else now() + ttl.total_seconds()
        index = next(
            (i for i, p in enumerate(queue.pending) if p.envelope.priority < envelope.priority),
            len(queue.pending),
        )
        queue.pending.insert(index, Pending(envelope, expires))
        queue.changed.set()
        self._activity.set()

    def _later(self, delay: timedelta, envelope: Envelope, counter: Timer) -> None:
        queue = self.queue(envelope.queue, envelope.kind)
        _count(queue, counter, +1)
        self.track(envelope, "pending", ran=False, due=now() + delay.total_seconds())
        waiting = Waiting(envelope, queue, counter)

        def release() -> None:
            if self._timers.get(envelope.job_id) is waiting:
                del self._timers[envelope.job_id]
            _count(queue, counter, -1)
            self.insert(envelope)

        waiting.handle = asyncio.get_running_loop().call_later(delay.total_seconds(), release)
        self._timers[envelope.job_id] = waiting

    def cancel(self, job_id: str) -> CancelResult:
        """Cancel job ``job_id``: a pending or waiting one leaves its queue for the cancelled
        list (releasing its unique key); a running one (handed out, unsettled) has its request
        set and stays running until its run ends (asked again meanwhile: ``"requested"``)."""
        found = self._unqueue(job_id)
        if found is not None:
            self.keys.release(job_id)
            return self._cancelled(*found)
        request = self.running.get(job_id)
        if request is None:
            return "not_found"
        if not request.done():
            request.set_result(None)
        return "requested"

    def _unqueue(self, job_id: str) -> tuple[QueueState, Envelope] | None:
        """Take pending job ``job_id`` out of its timer or its queue: its queue and envelope."""
        waiting = self._timers.pop(job_id, None)
        if waiting is not None:
            if waiting.handle is not None:
                waiting.handle.cancel()
            _count(waiting.queue, waiting.counter, -1)
            return waiting.queue, waiting.envelope
        for queue in self.queues.values():
            for index, item in enumerate(queue.pending):
                if item.envelope.job_id == job_id:
                    del queue.pending[index]
                    return queue, item.envelope
        return None

    # -- unique keys --------------------------------------------------------------------------

    def publish_unique(
        self,
        envelopes: Sequence[Envelope],
        keys: Sequence[UniqueKey | None],
        delay: timedelta | None,
    ) -> list[EnqueueResult]:
        """Publish each envelope unless a job in a refused state holds its key (see
        ``UniqueBackend.publish_unique``)."""
        results = []
        for envelope, key in zip(envelopes, keys, strict=True):
            full = None if key is None else key.bucketed(self.clock.epoch())
            holder = None if full is None else self.keys.holder(full)
            if holder is None:
                if key is not None and full is not None:
                    self.keys.take(full, envelope.job_id, key.mask, key.replace)
                self.publish([envelope], delay)
                results.append(EnqueueResult(envelope.job_id))
                continue
            if key is not None and key.replace and self.keys.state(holder) == "pending":
                self._replace(holder, envelope, delay)
                results.append(EnqueueResult(holder, outcome="replaced"))
                continue
            results.append(EnqueueResult(holder, outcome="skipped"))
        return results

    def superseded(self, queue: QueueState, envelope: Envelope) -> str | None:
        """The id of the job that supersedes ``envelope``'s job, going back to pending (it took
        its unique key while this one ran), else ``None``. A superseded job ends cancelled,
        saying which job holds the key (logged at WARNING), and must not be made deliverable
        again."""
        rival = self.keys.back(envelope.job_id)
        if rival is None:
            return None
        queue.cancelled.append(envelope)
        reason = superseded(rival)
        self.track(envelope, "cancelled", ran=False, error=reason)
        self.keys.release(envelope.job_id)
        log.warning("job %s ends cancelled, %s", envelope.job_id, reason)
        self._activity.set()
        return rival

    def _replace(self, job_id: str, envelope: Envelope, delay: timedelta | None) -> None:
        """Pending job ``job_id`` takes ``envelope``'s payload and headers, due after
        ``delay``."""
        found = self._unqueue(job_id)
        if found is None:
            return
        update = {"payload": envelope.payload, "headers": envelope.headers}
        self.publish([found[1].model_copy(update=update)], delay)

    def _cancelled(self, queue: QueueState, envelope: Envelope) -> Literal["cancelled"]:
        queue.cancelled.append(envelope)
        self.track(envelope, "cancelled", ran=False)
        self._activity.set()
        return "cancelled"

    def expire(self, queue: QueueState, envelope: Envelope) -> None:
        """Dead-letter ``envelope``, taken from ``queue``'s pending ones past its message TTL
        ("expired"); wakes ``wait_idle``."""
        queue.dead.append((envelope, "expired"))
        self.track(envelope, "failed", ran=False, error="expired")
        self._activity.set()

    # -- deliveries out -----------------------------------------------------------------------

    def handed_out(self, envelope: Envelope) -> None:
        """A consumer handed out a delivery of ``envelope``."""
        self._in_flight += 1
        self.keys.moved(envelope.job_id, "running")

    @property
    def in_flight(self) -> int:
        """Deliveries handed out and not settled yet."""
        return self._in_flight

    def settled(self) -> None:
        """A handed-out delivery was settled."""
        self._in_flight -= 1
        self._activity.set()

    def is_idle(self) -> bool:
        """Nothing pending, delayed, held or handed out and unsettled."""
        return self._in_flight == 0 and all(
            not q.pending and not q.held and not q.delayed for q in self.queues.values()
        )

    async def wait_idle(self) -> None:
        """Return once ``is_idle()`` holds (wakes on every change, never polls)."""
        while not self.is_idle():
            self._activity.clear()
            await self._activity.wait()

    def close(self) -> None:
        """Refuse further work, cancel the timers, and wake every waiting consumer."""
        self.closed = True
        for waiting in self._timers.values():
            if waiting.handle is not None:
                waiting.handle.cancel()
        self._timers.clear()
        for queue in self.queues.values():
            queue.changed.set()


def _count(queue: QueueState, counter: Timer, step: int) -> None:
    if counter == "held":
        queue.held += step
    else:
        queue.delayed += step
