"""``Producer[Q]``: enqueues jobs of one ``QueueSet`` through a backend.

``enqueue`` accepts only ``Job[Q]`` instances, so ``mypy --strict`` rejects a job of another
queue set; the same check runs at runtime (``TypeError``) before anything is published.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Generic

from queuey.backends.base import Backend, JobInfo, JobLookup
from queuey.durations import Duration, parse_delay
from queuey.envelope import Envelope
from queuey.jobs import Job, Q

__all__ = ["Producer"]


class Producer(Generic[Q]):
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

    def _target(self, job_type: type[Any]) -> tuple[str, str]:
        """``(job name, queue name)`` of a job class of this producer's set.

        Raises:
            TypeError: ``job_type`` is not a job of this producer's queue set.
        """
        if not (isinstance(job_type, type) and issubclass(job_type, Job)) or (
            job_type.job_queue().queue_set is not self.queue_set
        ):
            owner = getattr(getattr(job_type, "__queuey_queue__", None), "queue_set", None)
            raise TypeError(
                f"{job_type.__qualname__} belongs to "
                f"{getattr(owner, '__name__', 'no queue set')}, not {self.queue_set.__name__}"
            )
        return job_type.job_name(), job_type.job_queue().name

    def _envelope(self, job: Job[Q], priority: int = 0) -> Envelope:
        name, queue = self._target(type(job))
        return Envelope.new(name, queue, job.model_dump(mode="json"), priority=priority)

    def _envelopes(self, jobs: Sequence[Job[Q]]) -> list[Envelope]:
        """One envelope per job, each job class checked and resolved once per call."""
        targets: dict[type[Any], tuple[str, str]] = {}
        envelopes = []
        for job in jobs:
            job_type = type(job)
            target = targets.get(job_type)
            if target is None:
                target = targets[job_type] = self._target(job_type)
            envelopes.append(Envelope.new(target[0], target[1], job.model_dump(mode="json")))
        return envelopes

    async def enqueue(self, job: Job[Q], *, connection: Any = None) -> str:
        """Enqueue ``job`` for now at priority 0; returns its job id (a UUID string).

        Args:
            job: a job of this producer's queue set.
            connection: (PostgreSQL) the caller's psycopg ``AsyncConnection``; the job then
                commits or rolls back with the caller's transaction.

        Raises:
            TypeError: ``job`` belongs to another queue set.
            BackendError: the backend refused it; nothing was enqueued.
        """
        envelope = self._envelope(job)
        await self.backend.publish([envelope], connection=connection)
        return envelope.job_id

    async def enqueue_after(self, job: Job[Q], delay: Duration, *, connection: Any = None) -> str:
        """Enqueue ``job`` to be delivered after ``delay`` (string, ``timedelta`` or seconds;
        0 = now) at priority 0. Returns its job id.

        Raises:
            TypeError: ``job`` belongs to another queue set.
            ConfigError: ``delay`` does not parse or is negative.
            BackendError: the backend refused it.
        """
        envelope = self._envelope(job)
        wait = parse_delay(delay, "enqueue_after delay")
        await self.backend.publish([envelope], wait, connection=connection)
        return envelope.job_id

    async def defer(self, job: Job[Q], delay: Duration) -> str:
        """Hold ``job`` for ``delay``, then deliver it at its queue's top priority, ahead of the
        backlog. Returns its job id.

        Raises:
            TypeError: ``job`` belongs to another queue set.
            UnknownQueueError: (RabbitMQ) the queue was never declared by this backend.
        """
        top = type(job).job_queue().config.top_priority if isinstance(job, Job) else 0
        envelope = self._envelope(job, priority=top)
        await self.backend.defer(envelope, parse_delay(delay, "defer delay"))
        return envelope.job_id

    async def enqueue_many(
        self,
        jobs: Sequence[Job[Q]],
        *,
        delay: Duration | None = None,
        connection: Any = None,
    ) -> list[str]:
        """Enqueue ``jobs`` all or none (one round trip on PostgreSQL); returns their ids in
        order.

        Raises:
            TypeError: a job belongs to another queue set (nothing is enqueued).
            BackendError: the backend refused them.
        """
        envelopes = self._envelopes(jobs)
        if envelopes:
            wait = None if delay is None else parse_delay(delay, "enqueue_many delay")
            await self.backend.publish(envelopes, wait or timedelta(0), connection=connection)
        return [envelope.job_id for envelope in envelopes]

    async def job(self, job_id: str) -> JobInfo | None:
        """Where the job ``job_id`` (an id ``enqueue`` returned) is now: its state, attempts,
        last error and due time; ``None`` when the backend has no such job.

        Raises:
            NotImplementedError: the backend keeps no per-job state (RabbitMQ).
            ConfigError: (PostgreSQL) ``job_id`` is not a UUID.
            BackendError: the backend could not be asked.
        """
        if not isinstance(self.backend, JobLookup):
            name = type(self.backend).__name__
            raise NotImplementedError(f"{name} cannot look a job up by id")
        return await self.backend.job(job_id)
