"""The contract every transport implements: ``Backend``, ``Consumer`` and ``Delivery``.

This module holds the core Protocols and re-exports the rest of the contract: its values
(``_records``), the optional capabilities (``_capabilities``) and the synchronous publishing
half (``_sync_contract``); import every name from here.

For implementers; it may change between minor versions until it has settled. The runtime
(``Producer``, ``Worker``) talks to transports only through these Protocols, and a backend never
imports the runtime.

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

A PostgreSQL delivery is also a ``TransactionalDelivery``: ``transaction()`` commits the
handler's writes and the run's success together (``ctx.transaction()``); a delivery without it
refuses ``ctx.transaction()``.
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
from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol, runtime_checkable

from queuey.attempts import AttemptError
from queuey.backends._capabilities import (
    DepthBackend,
    HandlerSlots,
    JobLookup,
    Observable,
    ResultBackend,
    RunKeeper,
    ScheduleBackend,
    SlotAware,
    TransactionalDelivery,
)
from queuey.backends._records import CancelResult, JobEnd, JobInfo, JobState, QueueDepth
from queuey.backends._sync_contract import (
    SyncBackend,
    SyncJobLookup,
    SyncResultBackend,
    SyncUniqueBackend,
)
from queuey.envelope import Envelope, Kind
from queuey.progress import Progress
from queuey.queues import QueueConfig
from queuey.unique import EnqueueResult, FirstPublication, IdempotencyKey, UniqueKey

__all__ = [
    "Backend",
    "CancelResult",
    "Consumer",
    "Delivery",
    "DepthBackend",
    "HandlerSlots",
    "Observable",
    "QueueDepth",
    "RunKeeper",
    "ScheduleBackend",
    "SlotAware",
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
    "TransactionalDelivery",
]


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
