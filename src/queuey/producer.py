"""``Producer[Q]``: enqueues jobs of one ``QueueSet`` through a backend.

``enqueue`` accepts only ``Job[Q]`` instances, so ``mypy --strict`` rejects a job of another
queue set; the same check runs at runtime (``TypeError``) before anything is published. The
envelope building is ``ProducerBase``'s, shared with the sync twin ``queuey.sync.Producer``.

Before anything is written, every enqueue also checks that each job's payload is JSON every
backend stores alike (``_payload``: a ``PayloadError`` naming the job type and the field) and
that a delay is one the backend can hold (a ``ConfigError`` naming it: at most
``Backend.max_delay``, itself at most ``MAX_DURATION``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from queuey._runtime.producer_base import ProducerBase
from queuey.backends.base import Backend, CancelResult
from queuey.durations import Duration
from queuey.jobs import Job, Q

__all__ = ["Producer"]


class Producer(ProducerBase[Q]):
    """Enqueues jobs of ``queue_set``. Build with ``await Producer.create(...)`` (declares every
    queue of the set) or ``Producer.undeclared(...)`` (declares nothing)."""

    def __init__(self, queue_set: type[Q], backend: Backend) -> None:
        self.queue_set = queue_set
        self.backend = backend

    @classmethod
    async def create(cls, queue_set: type[Q], backend: Backend) -> Producer[Q]:
        """A producer whose queues are declared on ``backend``.

        Raises:
            BackendError: the declaration failed.
            SchemaError: (PostgreSQL) the schema needs ``queuey db migrate``.
        """
        await backend.declare([queue.config for queue in queue_set.all()])
        return cls(queue_set, backend)

    @classmethod
    def undeclared(cls, queue_set: type[Q], backend: Backend) -> Producer[Q]:
        """A producer that declares nothing (on RabbitMQ it cannot ``defer``)."""
        return cls(queue_set, backend)

    async def enqueue(self, job: Job[Q], *, priority: int = 0, connection: Any = None) -> str:
        """Enqueue ``job`` for now; returns its job id (a UUID string).

        Args:
            job: a job of this producer's queue set.
            priority: ``0..max_priority`` of its queue (default 0); higher is delivered first.
            connection: (PostgreSQL) the caller's psycopg ``AsyncConnection``; the job then
                commits or rolls back with the caller's transaction.

        Raises:
            TypeError: ``job`` belongs to another queue set.
            ValueError: ``priority`` is out of its queue's range (the message names both).
            PayloadError: a field is not JSON every backend stores alike (NaN, a lone
                surrogate...); nothing was enqueued.
            BackendError: the backend refused it; nothing was enqueued.
        """
        envelope = self._envelope(job, priority)
        await self.backend.publish([envelope], connection=connection)
        return envelope.job_id

    async def enqueue_after(
        self, job: Job[Q], delay: Duration, *, priority: int = 0, connection: Any = None
    ) -> str:
        """Enqueue ``job`` to be delivered after ``delay`` (string, ``timedelta`` or seconds;
        0 = now) at ``priority`` (as for ``enqueue``). Returns its job id.

        Raises:
            TypeError: ``job`` belongs to another queue set.
            ValueError: ``priority`` is out of its queue's range.
            PayloadError: a field is not JSON every backend stores alike.
            ConfigError: ``delay`` does not parse, is negative, or is longer than the backend
                can hold (``backend.max_delay``).
            BackendError: the backend refused it.
        """
        wait = self._delay(delay, "enqueue_after delay")
        envelope = self._envelope(job, priority)
        await self.backend.publish([envelope], wait, connection=connection)
        return envelope.job_id

    async def defer(self, job: Job[Q], delay: Duration) -> str:
        """Hold ``job`` for ``delay``, then deliver it at its queue's top priority, ahead of the
        backlog. Returns its job id.

        Raises:
            TypeError: ``job`` belongs to another queue set.
            PayloadError: a field is not JSON every backend stores alike.
            ConfigError: ``delay`` does not parse, is negative, or is longer than the backend
                can hold (``backend.max_delay``).
            UnknownQueueError: (RabbitMQ) the queue was never declared by this backend.
        """
        wait = self._delay(delay, "defer delay")
        envelope = self._deferred(job)
        await self.backend.defer(envelope, wait)
        return envelope.job_id

    async def enqueue_many(
        self,
        jobs: Sequence[Job[Q]],
        *,
        delay: Duration | None = None,
        priority: int = 0,
        connection: Any = None,
    ) -> list[str]:
        """Enqueue ``jobs`` all or none (one round trip on PostgreSQL), each at ``priority``
        (as for ``enqueue``); returns their ids in order.

        Raises:
            TypeError: a job belongs to another queue set (nothing is enqueued).
            ValueError: ``priority`` is out of a job's queue's range (nothing is enqueued).
            PayloadError: a job's field is not JSON every backend stores alike (nothing is
                enqueued).
            ConfigError: ``delay`` does not parse, is negative, or is longer than the backend
                can hold (``backend.max_delay``).
            BackendError: the backend refused them.
        """
        wait = self._delay(delay, "enqueue_many delay")
        envelopes = self._envelopes(jobs, priority)
        if envelopes:
            await self.backend.publish(envelopes, wait, connection=connection)
        return [envelope.job_id for envelope in envelopes]

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job ``job_id`` (of any queue): a pending or scheduled job ends
        ``cancelled`` and never runs; a running one is told to stop (PostgreSQL: through a
        NOTIFY to its worker, whose late outcome is then refused) and ends ``cancelled``.

        Returns:
            ``"cancelled"``, ``"requested"`` (it was running) or ``"not_found"`` (no pending,
            scheduled or running job has that id).

        Raises:
            NotSupportedError: (RabbitMQ) a queued message cannot be cancelled.
            BackendError: the backend failed; nothing changed.
        """
        return await self.backend.cancel(job_id)
