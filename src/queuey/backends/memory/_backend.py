"""``MemoryBackend``: an in-process backend for tests and the demo.

The backend is a thin face over a ``Store`` (``_store``), which its consumers and deliveries
(``_consumer``) share with it. Delays and holds run on the event loop's clock, so a virtual-time
loop (looptime) lets minutes of backoff pass in no wall time. A copy (``copy.copy(backend)``)
shares the state.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from queuey.backends.base import CancelResult, JobEnd, JobInfo, JobState, QueueDepth
from queuey.backends.memory._batches import MemoryBatchMethods
from queuey.backends.memory._consumer import MemoryConsumer
from queuey.backends.memory._records import QueueState
from queuey.backends.memory._store import Store
from queuey.backends.memory._workflows import MemoryWorkflowOps
from queuey.backends.steps import StepEdge, StepRow
from queuey.durations import MAX_DURATION
from queuey.envelope import Envelope, Kind
from queuey.errors import BackendError, UnknownJobError
from queuey.limits import LimitSpec, Throttled, ThrottleTally
from queuey.queues import QueueConfig
from queuey.schedule import ScheduleRecord
from queuey.unique import EnqueueResult, FirstPublication, IdempotencyKey, State, UniqueKey

__all__ = ["MemoryBackend"]


class MemoryBackend(MemoryWorkflowOps, MemoryBatchMethods):
    """In-memory transport honouring delays through the event loop's clock.

    Inspection helpers (synchronous): ``pending(q)``, ``pending_envelopes(q)``, ``acked(q)``,
    ``deferred(q)``, ``delayed(q)``, ``dead_letters(q)``, ``cancelled(q)``, ``queue_names()``,
    ``queue_config(q)``, ``in_flight()``, ``is_idle()``, ``is_closed()``; and
    ``await wait_idle()`` and ``await job(job_id)``. Topics
    (``kind="topic"``) live beside typed queues of the same name without colliding; the helpers
    take ``kind`` for them.

    Unique keys, idempotency keys and schedules behave as on PostgreSQL, on the backend's wall
    clock: the real time at first use (or ``start``), advancing with the event loop's clock.

    Args:
        start: the wall time the backend's clock reads at first use (aware ``datetime``;
            default: the real time), e.g. to run a schedule across a daylight saving change
            under virtual time.
    """

    supports_transactions = False
    messaging_system = "memory"
    max_delay = MAX_DURATION
    """Any delay queuey takes: the event loop's timers hold it."""

    def __init__(self, *, start: datetime | None = None, _store: Store | None = None) -> None:
        self._store = _store or Store(start)
        self._tally = ThrottleTally()
        if self._store.steps.on_end is None:
            self._store.steps.on_end = self._step_ended
            self._store.batches.on_end = self._member_ended

    def __copy__(self) -> MemoryBackend:
        return MemoryBackend(_store=self._store)

    def _queue(self, name: str, kind: Kind = "job") -> QueueState:
        """The state of queue ``name`` (created with defaults if unknown)."""
        return self._store.queue(name, kind)

    async def declare(self, queues: Sequence[QueueConfig]) -> None:
        """Create the queues; the first config of a name wins."""
        self._store.check_open()
        for config in queues:
            self._store.declare(config)

    async def publish(
        self,
        envelopes: Sequence[Envelope],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> None:
        """Make envelopes deliverable after ``delay`` (``None`` or zero = now).

        Raises:
            ShutDownError: the backend is closed.
            BackendError: a ``connection`` was given (no transactions in memory).
        """
        self._store.check_open()
        if connection is not None:
            raise BackendError("MemoryBackend does not take a database connection")
        self._store.publish(envelopes, delay)

    async def publish_unique(
        self,
        envelopes: Sequence[Envelope],
        keys: Sequence[UniqueKey | None],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> list[EnqueueResult]:
        """Publish each envelope unless a job in a refused state holds its key (see
        ``UniqueBackend``); one result per envelope.

        Raises:
            ShutDownError: the backend is closed.
            BackendError: a ``connection`` was given.
        """
        self._check_publish(connection)
        return self._store.publish_unique(envelopes, keys, delay)

    async def publish_once(
        self,
        envelopes: Sequence[Envelope],
        idempotency: IdempotencyKey,
        *,
        connection: object | None = None,
    ) -> FirstPublication:
        """Publish ``envelopes`` unless ``idempotency.key`` was used within its window.

        Raises:
            ShutDownError: the backend is closed.
            BackendError: a ``connection`` was given.
        """
        self._check_publish(connection)
        keys, now = self._store.keys, self._store.clock.epoch()
        first = keys.first_use(idempotency.key, now, idempotency.window)
        if first is not None:
            return FirstPublication(first.ids, first.fingerprint, False)
        ids = tuple(envelope.job_id for envelope in envelopes)
        self._store.publish(envelopes, None)
        keys.use(idempotency.key, ids, idempotency.fingerprint, now)
        return FirstPublication(ids, idempotency.fingerprint, True)

    def _check_publish(self, connection: object | None) -> None:
        self._store.check_open()
        if connection is not None:
            raise BackendError("MemoryBackend does not take a database connection")

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Hold ``envelope`` for ``delay`` (counted by ``deferred(q)``), then enqueue it."""
        self._store.check_open()
        self._store.defer(envelope, delay)

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job ``job_id``: a waiting workflow step ends cancelled (the steps after it
        fail with it or get its error); pending, delayed or held, it moves to ``cancelled(q)`` at
        once; handed out and unsettled, its delivery's ``cancel_requested`` is set and it is
        listed in ``cancelled(q)`` when its handler stops (its late outcome is refused).

        Raises:
            ShutDownError: the backend is closed.
        """
        self._store.check_open()
        record = self._store.jobs.get(job_id)
        if record is not None and record.state == "waiting":  # a workflow step: never queued
            self._store.steps.withdraw(job_id)
            self._store.track(record.envelope, "cancelled", ran=False, error="cancelled")
            return "cancelled"
        return self._store.cancel(job_id)

    async def start_workflow(
        self, workflow_id: str, steps: Sequence[StepRow], edges: Sequence[StepEdge]
    ) -> None:
        """Store a workflow's steps: the roots due now, the others waiting for their parents
        (``WorkflowBackend``), with the semantics of PostgreSQL's.

        Raises:
            ShutDownError: the backend is closed.
        """
        self._store.check_open()
        self._store.steps.start(workflow_id, steps, edges)
        for row in steps:
            envelope = _step_envelope(row, row.payload)
            if row.parents:
                self._store.track(envelope, "waiting", ran=False)
            else:
                self._store.insert(envelope)

    def _step_ended(
        self, job_id: str, state: JobState, result: str | None, error: str | None
    ) -> None:
        """Job ``job_id`` ended in ``state``: release or fail the workflow steps after it."""
        failure = None if state == "done" else (error or state)
        released = self._store.steps.ended(job_id, result, failure)
        for row, message in released.failed:
            self._store.track(_step_envelope(row, {}), "failed", ran=False, error=message)
        for row, payload in released.due:
            self._store.insert(_step_envelope(row, payload))

    def consumer(self, queue: QueueConfig) -> MemoryConsumer:
        """A consumer honouring ``queue.prefetch`` as unsettled deliveries, and
        ``queue.limits`` (flow limits, in this process, on the loop's clock)."""
        state = self._queue(queue.name, queue.kind)
        return MemoryConsumer(
            self._store, state, queue.prefetch, queue.job_types, queue.limits, self._tally
        )

    def throttled(self) -> list[Throttled]:
        """What this backend's consumers held back under flow limits (``ThrottleBackend``)."""
        return self._tally.snapshot()

    async def count_pending(self, queue: str, kind: Kind = "job") -> int:
        """Same as ``pending(queue)``."""
        return self.pending(queue, kind)

    @property
    def connected(self) -> bool:
        """Whether the backend is open (it has no server to lose)."""
        return not self._store.closed

    async def queue_depths(self) -> list[QueueDepth]:
        """Every queue with live envelopes (``DepthBackend``), ordered by kind then name."""
        return [
            depth
            for key in sorted(self._store.queues)
            if (depth := self._store.depth(self._store.queues[key])) is not None
        ]

    async def list_dead(
        self, queue: str, kind: Kind = "job", limit: int = 100
    ) -> list[tuple[Envelope, str]]:
        """Same as ``dead_letters(queue)``, at most ``limit``."""
        return self.dead_letters(queue, kind)[:limit]

    async def job(self, job_id: str) -> JobInfo | None:
        """Where job ``job_id`` is now (``JobLookup``): its state, attempts, last error and due
        time; ``None`` when this backend never saw it. Works after ``close`` too."""
        record = self._store.jobs.get(job_id)
        if record is None:
            return None
        info = record.info(self._store.clock)
        request = self._store.running.get(job_id)
        if info.state == "running" and request is not None and request.done():
            return dataclasses.replace(info, cancel_requested=True)
        return info

    def keep_open_for(self, runs: Iterable[asyncio.Future[Any]]) -> None:
        """Make ``close`` wait for ``runs`` (``RunKeeper``), so their outcomes are recorded."""
        self._store.open_runs.keep(runs)

    async def wait_end(self, job_id: str, timeout: float | None) -> JobEnd | None:
        """Wait until job ``job_id`` ends (``ResultBackend``): at once when it has, else when
        a delivery records it done, failed or cancelled; ``None`` after ``timeout`` seconds of
        the event loop's clock (virtual under looptime).

        Raises:
            UnknownJobError: this backend never saw the job.
        """
        record = self._store.jobs.get(job_id)
        if record is None:
            raise UnknownJobError(job_id)
        end = record.end()
        if end is not None:
            return end
        return await self._store.ends.wait(job_id, timeout)

    async def close(self) -> None:
        """Wait for the runs given to ``keep_open_for``, then close: later publishes raise
        ``ShutDownError``; timers are cancelled."""
        await self._store.open_runs.wait()
        self._store.close()

    async def __aenter__(self) -> MemoryBackend:
        """``async with MemoryBackend() as backend:`` closes it on the way out (``close``).

        Raises:
            ShutDownError: the backend was closed; create a new one.
        """
        self._store.check_open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- schedules ----------------------------------------------------------------------------

    async def clock(self) -> datetime:
        """The backend's wall clock (UTC)."""
        return self._store.clock.now()

    async def job_state(self, job_id: str) -> State | None:
        """The state of a job published with a unique key; ``None`` for any other."""
        return self._store.keys.state(job_id)

    async def register_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        """Create or update the schedules (their last slot and paused flag are kept)."""
        for record in records:
            self._store.keys.register(record, self._store.clock.now())

    async def list_schedules(self, names: Sequence[str] | None = None) -> list[ScheduleRecord]:
        """The known schedules (of ``names`` only, when given), by name."""
        known = self._store.keys.schedules
        return [known[n] for n in sorted(known) if names is None or n in names]

    async def record_fired(self, name: str, slot: datetime, job_id: str) -> None:
        """Record that ``slot`` of ``name`` fired as ``job_id``."""
        self._store.keys.fired(name, slot, job_id, self._store.clock.now())

    async def set_schedule_paused(self, name: str, paused: bool) -> bool:
        """Pause or resume ``name``; ``False`` when unknown."""
        return self._store.keys.pause(name, paused)

    # -- flow control: a pause is the limit zero ---------------------------------------------

    async def pause_queue(self, queue: str, kind: Kind = "job") -> bool:
        """Pause ``queue``: no row of it starts (its limit zero) until ``resume_queue``;
        running ones finish. Returns whether it ran before."""
        return self._pause(queue, kind, True)

    async def resume_queue(self, queue: str, kind: Kind = "job") -> bool:
        """Undo ``pause_queue``; its consumers look again at once. Returns whether it was
        paused."""
        return self._pause(queue, kind, False)

    def _pause(self, queue: str, kind: Kind, paused: bool) -> bool:
        flow = self._queue(queue, kind).flow
        changed, flow.paused = flow.paused != paused, paused
        self._queue(queue, kind).changed.set()
        return changed

    async def set_limits(
        self, queue: str, limits: Sequence[LimitSpec] | None, kind: Kind = "job"
    ) -> None:
        """Put ``limits`` (its job types' included) in place of ``queue``'s declared limits,
        in force at its consumers' next look; ``None``: the declared ones again."""
        state = self._queue(queue, kind)
        state.flow.override = None if limits is None else tuple(limits)
        state.changed.set()

    # -- inspection -------------------------------------------------------------------------

    def pending(self, queue: str, kind: Kind = "job") -> int:
        """Envelopes waiting and not handed out; delayed or held ones are not counted."""
        return len(self._queue(queue, kind).pending)

    def pending_envelopes(self, queue: str, kind: Kind = "job") -> list[Envelope]:
        """The envelopes ``pending(queue)`` counts, in the order they would be handed out."""
        return [item.envelope for item in self._queue(queue, kind).pending]

    def acked(self, queue: str, kind: Kind = "job") -> list[Envelope]:
        """Acknowledged envelopes in ack order (a retry or deferral acks the one it replaces)."""
        return list(self._queue(queue, kind).acked)

    def deferred(self, queue: str, kind: Kind = "job") -> int:
        """Envelopes held by ``defer`` and not yet released."""
        return self._queue(queue, kind).held

    def delayed(self, queue: str, kind: Kind = "job") -> int:
        """Envelopes published or retried with a delay that has not passed."""
        return self._queue(queue, kind).delayed

    def dead_letters(self, queue: str, kind: Kind = "job") -> list[tuple[Envelope, str]]:
        """``(envelope, reason)`` pairs in dead-letter order."""
        return list(self._queue(queue, kind).dead)

    def cancelled(self, queue: str, kind: Kind = "job") -> list[Envelope]:
        """Envelopes of cancelled jobs, in the order they were cancelled."""
        return list(self._queue(queue, kind).cancelled)

    def queue_names(self, kind: Kind = "job") -> list[str]:
        """Every known queue (or topic, with ``kind="topic"``), sorted."""
        return sorted(name for k, name in self._store.queues if k == kind)

    def queue_config(self, queue: str, kind: Kind = "job") -> QueueConfig:
        """The configuration a queue was declared with (defaults if never declared)."""
        return self._queue(queue, kind).config

    def in_flight(self) -> int:
        """Deliveries handed out and not settled yet."""
        return self._store.in_flight

    def is_idle(self) -> bool:
        """Nothing pending, delayed, held or handed out and unsettled."""
        return self._store.is_idle()

    async def wait_idle(self) -> None:
        """Return once ``is_idle()`` holds (wakes on every change, never polls)."""
        await self._store.wait_idle()

    def is_closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._store.closed


def _step_envelope(row: StepRow, payload: Any) -> Envelope:
    """The first-attempt envelope of workflow step ``row`` carrying ``payload``."""
    headers = dict(row.headers)
    envelope = Envelope.new(
        row.job_type, row.queue, payload, priority=row.priority, headers=headers
    )
    return envelope.model_copy(update={"job_id": row.job_id})
