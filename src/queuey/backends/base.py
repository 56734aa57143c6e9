"""The contract every transport implements: ``Backend``, ``Consumer`` and ``Delivery``.

For implementers; it may change between minor versions until it has settled. The runtime
(``Producer``, ``Worker``) talks to transports only through these Protocols, and a backend never
imports the runtime (STYLE.md, rule 3).

Semantics every backend honours, proven by ``tests/conformance``:

- ``publish`` makes envelopes deliverable after ``delay`` (none or zero = now), at their priority;
  within one priority, first in first out.
- ``defer`` holds an envelope for ``delay`` and then makes it deliverable at its (top) priority.
- A consumer hands out at most ``prefetch`` unsettled deliveries of its queue.
- Each ``Delivery`` is settled once: ``ack``, ``retry`` (the next attempt after a delay),
  ``defer``, or ``dead_letter`` with a reason. A settle that fails raises ``BackendError``; the
  delivery is then redelivered later (at-least-once), never lost.
- A job whose queue has ``message_ttl`` and was not started in time is dead-lettered "expired".
- A delay (``publish``, ``defer``, a retry or deferral of a delivery) is at most ``max_delay``;
  the producer refuses a longer one before anything is written.
- Queues are keyed by (``kind``, name): a topic never collides with a typed queue of the same
  name. A ``kind="topic"`` envelope with an empty ``job_type`` is recorded as handled (nobody
  subscribes) and never delivered.
- Within a queue, a higher priority is delivered first (up to the queue's ``max_priority``).
- ``cancel`` turns a pending or scheduled job into a cancelled one, which is never delivered;
  a backend that can reach a running job's worker tells it (``Delivery.cancel_requested``).

``SyncBackend`` is the publishing half of ``Backend`` for code without an event loop
(``queuey.sync.Producer``): the same methods, the same semantics, called synchronously.

Two optional capabilities, each a Protocol of its own (PostgreSQL and memory have both,
RabbitMQ neither):

- ``UniqueBackend``: ``publish_unique`` refuses a duplicate of a unique key while the first is
  in a refused state (one statement, no read-then-write race); ``publish_once`` records a
  publication once per idempotency key within a window.
- ``ScheduleBackend``: the backend's clock and the schedules' shared state (last slot fired,
  paused), so every worker that knows a schedule agrees on it.
A backend that keeps per-job state (PostgreSQL, memory) also implements ``JobLookup``: a job's
state by the id ``enqueue`` returned, as a ``JobInfo``; and ``ResultBackend``: waiting for a job
to end (``wait_end``), however many wait at once, without a connection or a polling loop per
waiter, and reading it at once when it has ended already. A delivery's ``ack`` carries the
handler's result (JSON text) for a job that declares a result type; it is stored with the
completion (on PostgreSQL in the same fenced statement), and a backend without per-job state
(RabbitMQ) drops it (its producers refuse to enqueue such a job).

For observability every backend names itself (``Observable``: ``messaging_system``, the
OpenTelemetry ``messaging.system``; ``connected``, what a worker's ``/ready`` reports), and a
backend that can count its queues at once (PostgreSQL in one statement, memory) implements
``DepthBackend``: every queue's depth and oldest due age, the gauges an autoscaler reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, runtime_checkable

from queuey.attempts import AttemptError
from queuey.envelope import Envelope, Kind
from queuey.progress import Progress
from queuey.queues import QueueConfig
from queuey.schedule import ScheduleRecord
from queuey.unique import EnqueueResult, FirstPublication, IdempotencyKey, State, UniqueKey

__all__ = [
    "Backend",
    "CancelResult",
    "Consumer",
    "Delivery",
    "DepthBackend",
    "Observable",
    "QueueDepth",
    "RunKeeper",
    "ScheduleBackend",
    "SyncBackend",
    "UniqueBackend",
    "JobEnd",
    "JobInfo",
    "JobLookup",
    "JobState",
    "Progress",
    "ResultBackend",
    "SyncJobLookup",
    "SyncResultBackend",
    "SyncUniqueBackend",
]

CancelResult = Literal["cancelled", "requested", "not_found"]
"""What ``cancel`` did: ``"cancelled"`` (the job was pending or scheduled and is now cancelled),
``"requested"`` (it was running: its worker was told, and it ends cancelled when that run
ends, staying running and held until then), ``"not_found"``
(no pending, scheduled or running job has this id: unknown, finished or already cancelled)."""

JobState = Literal["pending", "running", "done", "failed", "cancelled", "waiting"]
"""Where a job is: pending (due now, or scheduled for later: see ``JobInfo.due_at``), being run
by a worker, handled, failed for good (a dead letter, kept for a person), cancelled, or waiting
(a workflow step whose parents have not all ended; it is never claimed until they have)."""


@dataclass(frozen=True)
class JobEnd:
    """How a job ended, as an awaiter of its result reads it.

    Attributes:
        state: ``"done"``, ``"failed"`` or ``"cancelled"``.
        error: the last error or the dead-letter reason (``None`` when none was recorded).
        result: the stored result as JSON text; ``None`` when none was stored (a job that
            declares no result type).
    """

    state: JobState
    error: str | None
    result: str | None


@dataclass(frozen=True)
class JobInfo:
    """One job (or topic message) as its backend knows it now.

    Attributes:
        id: the job id ``enqueue`` returned (a UUID string).
        kind: ``"job"`` or ``"topic"``.
        queue: the queue name (a topic message's topic).
        job_type: the job's name (a topic message's subscriber).
        state: ``"pending"``, ``"running"``, ``"done"``, ``"failed"``, ``"cancelled"`` or
            ``"waiting"`` (a workflow step whose parents have not all ended: never claimed).
        attempts: runs started (0 before the first; a deferral gives its run back).
        redeliveries: runs that ended with a lost worker (PostgreSQL leases).
        deferrals: times a handler deferred it.
        priority: its priority (a deferred job carries its queue's top priority).
        due_at: when it is (pending) or was due to run, an aware UTC datetime; a pending job
            due in the future is scheduled (a delay, a retry's backoff, a deferral).
        last_error: the last failure's text (a retry's error, the dead-letter reason), kept
            after a later success; ``None`` when it never failed.
        payload: the job's fields (decoded JSON).
        result: a done job's stored result (decoded JSON; ``None`` when none was stored).
        progress: the last progress its handler reported (``None`` when none).
        errors: every failed attempt's ``AttemptError``, oldest first (the latest
            ``MAX_ATTEMPT_ERRORS`` of them); empty when no run failed.
        cancel_requested: a cancel reached the job while it runs (``state`` is ``"running"``):
            it ends ``cancelled`` when that run ends.
    """

    id: str
    kind: Kind
    queue: str
    job_type: str
    state: JobState
    attempts: int
    redeliveries: int
    deferrals: int
    priority: int
    due_at: datetime
    last_error: str | None
    payload: Any
    result: Any = None
    progress: Progress | None = None
    errors: tuple[AttemptError, ...] = ()
    cancel_requested: bool = False


@runtime_checkable
class JobLookup(Protocol):
    """A backend that can say where a job is by its id (PostgreSQL and memory)."""

    async def job(self, job_id: str) -> JobInfo | None:
        """The job ``job_id`` as the backend knows it now; ``None`` when there is no such job
        (never enqueued here, or a done job already deleted by retention).

        Raises:
            BackendError: the backend could not be asked.
        """
        ...


@runtime_checkable
class ResultBackend(Protocol):
    """A backend that stores results and lets callers wait for a job to end (PostgreSQL and
    memory)."""

    async def wait_end(self, job_id: str, timeout: float | None) -> JobEnd | None:
        """Wait until job ``job_id`` is done, failed or cancelled (at once when it is already);
        ``None`` when ``timeout`` seconds passed first (the job is left alone).

        Raises:
            UnknownJobError: there is no such job (never enqueued, or deleted by retention).
            ConfigError: (PostgreSQL) ``job_id`` is not a UUID.
            BackendError: the backend could not be asked.
        """
        ...


class Delivery(Protocol):
    """One handed-out envelope, to be settled exactly once."""

    @property
    def envelope(self) -> Envelope:
        """The delivered envelope."""
        ...

    async def ack(self, result: str | None = None) -> None:
        """Record success, with ``result`` (JSON text) when the job declares a result type
        (stored with the completion; a backend without per-job state drops it)."""
        ...

    async def retry(
        self,
        envelope: Envelope,
        delay: timedelta,
        error: str,
        failure: AttemptError | None = None,
    ) -> None:
        """Replace this delivery by ``envelope`` (the next attempt), deliverable after ``delay``.

        ``error`` is the failure text kept for operators; ``failure``, the failed attempt's
        record, is added to the job's history by a backend that keeps one (stamped with the
        backend's time and the worker).
        """
        ...

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Replace this delivery by ``envelope`` held for ``delay`` (no attempt spent)."""
        ...

    async def dead_letter(self, reason: str, failure: AttemptError | None = None) -> None:
        """Move this delivery to the dead letters with ``reason`` (``failure``: as for
        ``retry``)."""
        ...

    async def release(self) -> None:
        """Hand this delivery back untouched, deliverable again at once, no attempt spent
        (graceful shutdown cancelled its handler)."""
        ...

    @property
    def cancel_requested(self) -> asyncio.Future[None] | None:
        """Done once the job was cancelled while it runs (``Backend.cancel``); ``None`` when
        this backend cannot reach a running job (then it never is)."""
        ...

    @property
    def lease_lost(self) -> bool:
        """Whether this run lost its lease (a backend with leases found the job no longer held
        by this process; it may run elsewhere); ``cancel_requested`` is then done too. Always
        false on a backend without leases."""
        ...

    async def cancelled(self) -> None:
        """The run whose cancel was asked for has ended: record the job cancelled (nothing is
        retried) and free this delivery; after a lost lease (``lease_lost``) only free it."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        """A database transaction (yielding the driver's connection) in which the handler's
        writes and this run's success commit together, fenced like every settle; the later
        ``ack`` then only frees the delivery.

        Raises:
            NotSupportedError: this backend has no such transaction (only PostgreSQL has).
        """
        ...


class Consumer(Protocol):
    """A stream of deliveries from one queue, at most ``prefetch`` unsettled at a time."""

    async def next(self) -> Delivery | None:
        """Wait for the next delivery; ``None`` once ``stop`` was called and nothing pulled
        remains.

        Raises:
            BackendError: the consumer cannot go on (the backend was closed underneath it).
        """
        ...

    async def stop(self) -> None:
        """Stop pulling new deliveries; those already pulled are still handed out by ``next``."""
        ...


@runtime_checkable
class Backend(Protocol):
    """A transport for envelopes.

    Attributes:
        supports_transactions: ``publish`` accepts the caller's database connection, so an
            enqueue commits or rolls back with the caller's transaction.
        max_delay: the longest delay this backend can hold a message for, at most
            ``queuey.durations.MAX_DURATION`` (RabbitMQ: about 24.8 days).
    """

    supports_transactions: bool
    max_delay: timedelta

    async def declare(self, queues: Sequence[QueueConfig]) -> None:
        """Make sure ``queues`` exist with these options. Idempotent.

        Raises:
            BackendError: the transport refused the declaration.
            SchemaError: (PostgreSQL) the schema is older than this version needs.
        """
        ...

    async def publish(
        self,
        envelopes: Sequence[Envelope],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> None:
        """Make ``envelopes`` deliverable after ``delay`` (none = now), all or none.

        Args:
            envelopes: the envelopes, each naming its queue.
            delay: how long before they may be delivered.
            connection: the caller's own connection (only when ``supports_transactions``).

        Raises:
            BackendError: nothing was published.
            ShutDownError: the backend is closed.
        """
        ...

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Hold ``envelope`` for ``delay``, then deliver it at its priority.

        Raises:
            UnknownQueueError: (RabbitMQ) the queue was never declared by this backend.
        """
        ...

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job ``job_id``: a pending or scheduled job becomes cancelled (never
        delivered); a running one's worker is told, where the backend can reach it.

        Raises:
            NotSupportedError: (RabbitMQ) a queued message cannot be cancelled.
            BackendError: the backend failed; nothing changed.
        """
        ...

    def consumer(self, queue: QueueConfig) -> Consumer:
        """A new consumer of ``queue``."""
        ...

    async def count_pending(self, queue: str, kind: Kind = "job") -> int:
        """Envelopes of ``queue`` waiting to be delivered now (not delayed, not held)."""
        ...

    async def list_dead(
        self, queue: str, kind: Kind = "job", limit: int = 100
    ) -> list[tuple[Envelope, str]]:
        """Up to ``limit`` dead letters of ``queue`` as ``(envelope, reason)``, oldest first.
        Reading them changes nothing."""
        ...

    async def close(self) -> None:
        """Release connections. Idempotent."""
        ...


@runtime_checkable
class RunKeeper(Protocol):
    """A backend whose ``close`` waits for the runs of this process it is given: runs that
    could not be stopped (a plain handler's thread) and whose jobs it still holds, so that
    closing it never hands such a job to another worker while it runs here."""

    def keep_open_for(self, runs: Iterable[asyncio.Future[Any]]) -> None:
        """Make ``close`` wait for ``runs`` to end first (keeping their jobs held meanwhile)."""
        ...


@runtime_checkable
class Observable(Protocol):
    """What a backend tells observability about itself.

    Attributes:
        messaging_system: the OpenTelemetry ``messaging.system`` of its spans
            (``"postgresql"``, ``"rabbitmq"``, ``"memory"``).
        connected: whether it reaches its server now, as far as it knows without asking
            (``False`` during an outage it noticed, and once closed).
    """

    messaging_system: str

    @property
    def connected(self) -> bool:
        """Whether the server is reachable, as last seen."""
        ...


@dataclass(frozen=True)
class QueueDepth:
    """The live messages of one queue (queues holding only handled messages are not listed).

    Attributes:
        kind: ``"job"`` or ``"topic"``.
        queue: the queue (or topic) name.
        pending: messages due now, waiting for a worker.
        scheduled: messages not yet due (delayed, or waiting for a retry).
        running: messages a worker holds.
        failed: messages that failed for good and wait for a person.
        oldest_pending_secs: how long the oldest due message has waited since it became due
            (seconds, the backend's clock); ``None`` when nothing is due.
        waiting: workflow steps whose parents have not all ended (never claimed until then).
    """

    kind: Kind
    queue: str
    pending: int
    scheduled: int
    running: int
    failed: int
    oldest_pending_secs: float | None
    waiting: int = 0


@runtime_checkable
class DepthBackend(Protocol):
    """A backend that counts every queue's messages at once (PostgreSQL, memory)."""

    async def queue_depths(self) -> list[QueueDepth]:
        """Every queue with live messages, ordered by kind then name; one round trip.

        Raises:
            BackendError: the backend could not be asked.
        """
        ...


@runtime_checkable
class UniqueBackend(Backend, Protocol):
    """A backend that enforces unique keys and idempotency keys."""

    async def publish_unique(
        self,
        envelopes: Sequence[Envelope],
        keys: Sequence[UniqueKey | None],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> list[EnqueueResult]:
        """Publish ``envelopes`` like ``publish`` (all or none), each with its unique key
        (``keys[i]``, ``None`` for none): an envelope whose key a job in a refused state holds
        is not inserted (with ``replace``, a pending holder takes its payload, headers and due
        time; a running debounced holder lets one pending successor in). Envelopes of one call
        sharing a key act as if published one after another.

        Returns:
            One result per envelope, in order: its id and outcome ``"inserted"``, or the
            holder's id and ``"replaced"`` or ``"skipped"``.

        Raises:
            BackendError: nothing was published.
        """
        ...

    async def publish_once(
        self,
        envelopes: Sequence[Envelope],
        idempotency: IdempotencyKey,
        *,
        connection: object | None = None,
    ) -> FirstPublication:
        """Publish ``envelopes`` unless ``idempotency.key`` was used within its window; then
        write nothing and answer with the first publication's ids and fingerprint.

        Raises:
            BackendError: nothing was published.
        """
        ...


@runtime_checkable
class ScheduleBackend(Protocol):
    """The shared state of periodic schedules, and the clock their slots are read on."""

    async def clock(self) -> datetime:
        """The backend's current time, timezone-aware (the database's ``now()``)."""
        ...

    async def job_state(self, job_id: str) -> State | None:
        """The state of job ``job_id``; ``None`` when there is no such job (any more)."""
        ...

    async def register_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        """Create the schedules that do not exist yet and update their expression and time
        zone; their last slot and paused flag are kept."""
        ...

    async def list_schedules(self, names: Sequence[str] | None = None) -> list[ScheduleRecord]:
        """The known schedules (those of ``names`` only, when given), by name."""
        ...

    async def record_fired(self, name: str, slot: datetime, job_id: str) -> None:
        """Slot ``slot`` of schedule ``name`` was fired (or found fired) as job ``job_id``;
        the schedule's last slot only moves forward."""
        ...

    async def set_schedule_paused(self, name: str, paused: bool) -> bool:
        """Pause or resume schedule ``name``; ``False`` when no such schedule is known."""
        ...


class SyncBackend(Protocol):
    """The publishing half of ``Backend``, called without an event loop (thread-safe).

    Attributes:
        supports_transactions: ``publish`` accepts the caller's database connection.
    """

    supports_transactions: bool

    def declare(self, queues: Sequence[QueueConfig]) -> None:
        """As ``Backend.declare``."""
        ...

    def publish(
        self,
        envelopes: Sequence[Envelope],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> None:
        """As ``Backend.publish``; ``connection`` is a synchronous one (psycopg
        ``Connection``, or Django's ``django.db.connection``)."""
        ...

    def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """As ``Backend.defer``."""
        ...

    def cancel(self, job_id: str) -> CancelResult:
        """As ``Backend.cancel``."""
        ...

    def close(self) -> None:
        """Release connections (and threads). Idempotent."""
        ...


@runtime_checkable
class SyncUniqueBackend(Protocol):
    """``UniqueBackend.publish_unique`` for code without an event loop (``queuey.sync``
    backends over PostgreSQL or memory)."""

    def publish_unique(
        self,
        envelopes: Sequence[Envelope],
        keys: Sequence[UniqueKey | None],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> list[EnqueueResult]:
        """As ``UniqueBackend.publish_unique``; ``connection`` as for ``SyncBackend.publish``.

        Raises:
            BackendError: nothing was published.
            ConfigError: the backend cannot refuse duplicates (RabbitMQ).
        """
        ...


@runtime_checkable
class SyncJobLookup(Protocol):
    """``JobLookup`` for code without an event loop (``queuey.sync`` backends)."""

    def job(self, job_id: str) -> JobInfo | None:
        """As ``JobLookup.job``."""
        ...


@runtime_checkable
class SyncResultBackend(Protocol):
    """``ResultBackend`` for code without an event loop (``queuey.sync`` backends)."""

    def wait_end(self, job_id: str, timeout: float | None) -> JobEnd | None:
        """As ``ResultBackend.wait_end``, blocking the calling thread."""
        ...
