"""``Producer[Q]`` for code with no event loop: the sync twin of ``queuey.Producer``, exported
as ``queuey.sync.Producer``.

It mirrors the async producer name for name (STYLE rule 6; ``tests/unit/test_sync_parity.py``
checks the methods and their parameters), builds its envelopes with the same ``ProducerBase``,
and publishes through a ``SyncBackend``: ``SyncPostgresBackend`` (psycopg's synchronous pool,
or the caller's own connection) or ``ThreadedBackend`` (any async backend on a loop thread).
Like the async one, it is generic in its queue set, so ``mypy --strict`` rejects a job of
another set. It keeps no state of its own between calls: any number of threads may share one.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, TypeVar, cast, overload

from pydantic import TypeAdapter

from queuey._runtime.producer_base import ProducerBase, sending_for
from queuey.backends.base import (
    CancelResult,
    JobInfo,
    SyncBackend,
    SyncJobLookup,
    SyncResultBackend,
)
from queuey.durations import Duration
from queuey.errors import NotSupportedError
from queuey.jobs import Job, NoResult, Q
from queuey.results import SyncJobHandle, wait_result

__all__ = ["Producer"]

T = TypeVar("T")


class Producer(ProducerBase[Q]):
    """Enqueues jobs of ``queue_set`` synchronously. Build with ``Producer.create(...)``
    (declares every queue of the set) or ``Producer.undeclared(...)`` (declares nothing).

    A job whose class declares ``unique=`` is refused with a ``ConfigError`` (enqueue it with the
    async ``queuey.Producer``)."""

    refuses_unique = True

    def __init__(
        self, queue_set: type[Q], backend: SyncBackend, *, tracing: object = False
    ) -> None:
        self.queue_set = queue_set
        self.backend = backend
        self.sending = sending_for(backend, tracing)
        self.keeps_results = isinstance(backend, SyncResultBackend)

    @classmethod
    def create(
        cls, queue_set: type[Q], backend: SyncBackend, *, tracing: object = False
    ) -> Producer[Q]:
        """A producer whose queues are declared on ``backend`` (which must be open); with
        ``tracing`` each enqueue is a PRODUCER span, as for the async ``Producer``.

        Raises:
            BackendError: the declaration failed.
            ShutDownError: the backend is not open.
        """
        backend.declare([queue.config for queue in queue_set.all()])
        return cls(queue_set, backend, tracing=tracing)

    @classmethod
    def undeclared(
        cls, queue_set: type[Q], backend: SyncBackend, *, tracing: object = False
    ) -> Producer[Q]:
        """A producer that declares nothing (on RabbitMQ it cannot ``defer``)."""
        return cls(queue_set, backend, tracing=tracing)

    @overload
    def enqueue(  # type: ignore[overload-overlap]
        self, job: Job[Q, NoResult], *, priority: int = 0, connection: Any = None
    ) -> str: ...

    @overload
    def enqueue(
        self, job: Job[Q, T], *, priority: int = 0, connection: Any = None
    ) -> SyncJobHandle[T]: ...

    def enqueue(self, job: Job[Q, Any], *, priority: int = 0, connection: Any = None) -> str:
        """Enqueue ``job`` for now; returns its job id (a UUID string): for a job that declares
        a result type ``R``, a ``SyncJobHandle[R]`` whose ``result()`` blocks until it ends.

        Args:
            job: a job of this producer's queue set.
            priority: ``0..max_priority`` of its queue (default 0); higher is delivered first.
            connection: (PostgreSQL) the caller's psycopg ``Connection`` or Django's
                ``django.db.connection``; the job then commits or rolls back with the caller's
                transaction (``transaction.atomic()``).

        Raises:
            TypeError: ``job`` belongs to another queue set, or ``connection`` is not one.
            ValueError: ``priority`` is out of its queue's range (the message names both).
            BackendError: the backend refused it; nothing was enqueued.
        """
        envelope = self._envelope(job, priority)
        with self.sending([envelope]):
            self.backend.publish([envelope], connection=connection)
        adapter = type(job).__queuey_result__
        if adapter is not None:
            return SyncJobHandle(envelope.job_id, self.backend, adapter)
        return envelope.job_id

    def enqueue_after(
        self, job: Job[Q, Any], delay: Duration, *, priority: int = 0, connection: Any = None
    ) -> str:
        """Enqueue ``job`` to be delivered after ``delay`` (string, ``timedelta`` or seconds;
        0 = now) at ``priority`` (as for ``enqueue``). Returns its job id.

        Raises:
            TypeError: ``job`` belongs to another queue set.
            ValueError: ``priority`` is out of its queue's range.
            PayloadError: a field is not JSON every backend stores alike.
            ConfigError: ``delay`` does not parse, is negative, or is longer than the backend
                can hold.
            BackendError: the backend refused it.
        """
        wait = self._delay(delay, "enqueue_after delay")
        envelope = self._envelope(job, priority)
        with self.sending([envelope]):
            self.backend.publish([envelope], wait, connection=connection)
        return envelope.job_id

    def defer(self, job: Job[Q, Any], delay: Duration) -> str:
        """Hold ``job`` for ``delay``, then deliver it at its queue's top priority, ahead of the
        backlog. Returns its job id.

        Raises:
            TypeError: ``job`` belongs to another queue set.
            PayloadError: a field is not JSON every backend stores alike.
            ConfigError: ``delay`` does not parse, is negative, or is longer than the backend
                can hold.
            UnknownQueueError: (RabbitMQ) the queue was never declared by this backend.
        """
        wait = self._delay(delay, "defer delay")
        envelope = self._deferred(job)
        with self.sending([envelope]):
            self.backend.defer(envelope, wait)
        return envelope.job_id

    def enqueue_many(
        self,
        jobs: Sequence[Job[Q, Any]],
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
            PayloadError: a job's field is not JSON every backend stores alike.
            ConfigError: ``delay`` does not parse, is negative, or is longer than the backend
                can hold.
            BackendError: the backend refused them.
        """
        wait = self._delay(delay, "enqueue_many delay")
        envelopes = self._envelopes(jobs, priority)
        if envelopes:
            with self.sending(envelopes):
                self.backend.publish(envelopes, wait, connection=connection)
        return [envelope.job_id for envelope in envelopes]

    def cancel(self, job_id: str) -> CancelResult:
        """Cancel job ``job_id``, as the async ``Producer.cancel`` does.

        Returns:
            ``"cancelled"``, ``"requested"`` (it was running) or ``"not_found"``.

        Raises:
            NotSupportedError: (RabbitMQ) a queued message cannot be cancelled.
            BackendError: the backend failed; nothing changed.
        """
        return self.backend.cancel(job_id)

    def job(self, job_id: str) -> JobInfo | None:
        """Where job ``job_id`` is now, as the async ``Producer.job`` says.

        Raises:
            NotSupportedError: the backend keeps no per-job state (RabbitMQ).
            ConfigError: (PostgreSQL) ``job_id`` is not a UUID.
            BackendError: the backend could not be asked.
        """
        if not isinstance(self.backend, SyncJobLookup):
            raise NotSupportedError(f"{type(self.backend).__name__} cannot look a job up by id")
        return self.backend.job(job_id)

    def result(self, job_id: str, result_type: type[T], *, timeout: Duration | None = None) -> T:
        """As the async ``Producer.result``, blocking the calling thread.

        Raises:
            JobFailedError, ResultTimeoutError, UnknownJobError, BackendError: as for the
                async ``Producer.result``.
            NotSupportedError: the sync backend cannot wait for results
                (``SyncPostgresBackend``: use ``ThreadedBackend`` over ``PostgresBackend``).
        """
        adapter: TypeAdapter[T] = _adapter(cast(Any, result_type))
        return wait_result(self.backend, job_id, adapter, timeout)


@lru_cache(maxsize=256)
def _adapter(result_type: Any) -> TypeAdapter[Any]:
    """A validator of ``result_type`` (built once per type)."""
    return TypeAdapter(result_type)
