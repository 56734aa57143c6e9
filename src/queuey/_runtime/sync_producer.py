"""``Producer[Q]`` for code with no event loop: the sync twin of ``queuey.Producer``, exported
as ``queuey.sync.Producer``.

It mirrors the async producer name for name and behaviour for behaviour (
``tests/unit/test_sync_parity.py`` checks the methods and their parameters,
``tests/conformance/test_sync_behaviour.py`` what each does), builds its envelopes with the
same ``ProducerBase``, and publishes through a ``SyncBackend``: ``SyncPostgresBackend``
(psycopg's synchronous pool, or the caller's own connection) or ``ThreadedBackend`` (any async
backend on a loop thread). Like the async one, it is generic in its queue set, so
``mypy --strict`` rejects a job of another set. It keeps no state of its own between calls:
any number of threads may share one.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from functools import lru_cache
from typing import Any, TypeVar, cast, overload

from pydantic import TypeAdapter

from queuey._job_batch import inserted, job_classes
from queuey._runtime.loop_thread import ThreadedBackend
from queuey._runtime.producer_base import ProducerBase, sending_for, workflow_sending
from queuey._runtime.transactions import connection_for
from queuey.backends.base import (
    CancelResult,
    JobInfo,
    SyncBackend,
    SyncJobLookup,
    SyncResultBackend,
    SyncUniqueBackend,
    UniqueBackend,
)
from queuey.backends.steps import WORKFLOW_HEADER, SyncWorkflowBackend, workflows_refused
from queuey.backends.workflow_ops import WorkflowCancel, WorkflowInfo
from queuey.batches import SyncBatchProducing
from queuey.durations import Duration
from queuey.envelope import Envelope
from queuey.errors import ConfigError, NotSupportedError
from queuey.jobs import Job, NoResult, Q, unique_key_of
from queuey.producer import unique_jobs
from queuey.results import SyncJobHandle, wait_result
from queuey.unique import EnqueueResult, UniqueKey
from queuey.workflows import Workflow

__all__ = ["Producer"]

T = TypeVar("T")


class Producer(ProducerBase[Q], SyncBatchProducing):
    """Enqueues jobs of ``queue_set`` synchronously. Build with ``Producer.create(...)``
    (declares every queue of the set) or ``Producer.undeclared(...)`` (declares nothing).

    Every method behaves as the async ``queuey.Producer``'s, blocking instead of awaiting:
    the same ``EnqueueResult`` answers, unique jobs refused as duplicates through the same
    statement (PostgreSQL, memory), ``connection=`` to join the caller's transaction. An
    enqueue given no ``connection=`` uses the backend's ``default_connection`` when it has one;
    with neither, one made inside an open Django ``transaction.atomic()`` block warns
    (``TransactionWarning``) that it does not follow the block."""

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
            ConfigError: a job class of the set declares ``unique=`` and ``backend`` cannot
                refuse duplicates (RabbitMQ).
            BackendError: the declaration failed.
            ShutDownError: the backend is not open.
        """
        declaring = unique_jobs(queue_set)
        if declaring:
            _unique_backend(backend, ", ".join(declaring))
        backend.declare([queue.config for queue in queue_set.all()])
        return cls(queue_set, backend, tracing=tracing)

    @classmethod
    def undeclared(
        cls, queue_set: type[Q], backend: SyncBackend, *, tracing: object = False
    ) -> Producer[Q]:
        """A producer that declares nothing (on RabbitMQ it cannot ``defer``)."""
        return cls(queue_set, backend, tracing=tracing)

    def _unique(
        self,
        envelopes: Sequence[Envelope],
        keys: list[UniqueKey | None],
        delay: timedelta | None,
        connection: Any,
    ) -> list[EnqueueResult]:
        backend = _unique_backend(self.backend, envelopes[0].job_type)
        with self.sending(envelopes):
            return backend.publish_unique(envelopes, keys, delay, connection=connection)

    def _one(
        self, job: Job[Q, Any], envelope: Envelope, delay: timedelta | None, connection: Any
    ) -> EnqueueResult:
        """Publish ``envelope`` of ``job`` (under its unique key, if it has one)."""
        if type(job).__queuey_unique__ is not None:
            (result,) = self._unique([envelope], [unique_key_of(job)], delay, connection)
            return self._typed(job, result)
        with self.sending([envelope]):
            self.backend.publish([envelope], delay, connection=connection)
        return self._typed(job, EnqueueResult(envelope.job_id))

    def _typed(self, job: Job[Q, Any], result: EnqueueResult) -> EnqueueResult:
        """``result`` as a ``SyncJobHandle`` when ``job`` declares a result type."""
        adapter = type(job).__queuey_result__
        if adapter is None:
            return result
        return SyncJobHandle(result.job_id, self.backend, adapter, result.inserted)

    @overload
    def enqueue(  # type: ignore[overload-overlap]
        self, job: Job[Q, NoResult], *, priority: int = 0, connection: Any = None
    ) -> EnqueueResult: ...

    @overload
    def enqueue(
        self, job: Job[Q, T], *, priority: int = 0, connection: Any = None
    ) -> SyncJobHandle[T]: ...

    def enqueue(
        self, job: Job[Q, Any], *, priority: int = 0, connection: Any = None
    ) -> EnqueueResult:
        """Enqueue ``job`` for now.

        Args:
            job: a job of this producer's queue set.
            priority: ``0..max_priority`` of its queue (default 0); higher is delivered first.
            connection: (PostgreSQL) the caller's psycopg ``Connection`` or Django's
                ``django.db.connection``; the job then commits or rolls back with the caller's
                transaction (``transaction.atomic()``). Default: the backend's
                ``default_connection``, else its own connection (committed at once).

        Returns:
            Its job id as an ``EnqueueResult`` (``inserted`` is ``False`` when a unique job's
            duplicate was refused; the id is then the existing job's); for a job that declares
            a result type ``R``, a ``SyncJobHandle[R]`` whose ``result()`` blocks until it ends.

        Raises:
            TypeError: ``job`` belongs to another queue set, or ``connection`` is not one.
            ValueError: ``priority`` is out of its queue's range (the message names both).
            PayloadError: a field is not JSON every backend stores alike.
            ConfigError: ``job`` is unique and the backend cannot refuse duplicates.
            BackendError: the backend refused it; nothing was enqueued.
        """
        envelope = self._envelope(job, priority)
        return self._one(job, envelope, None, connection_for(self.backend, connection))

    @overload
    def enqueue_after(  # type: ignore[overload-overlap]
        self, job: Job[Q, NoResult], delay: Duration, *, priority: int = 0, connection: Any = None
    ) -> EnqueueResult: ...

    @overload
    def enqueue_after(
        self, job: Job[Q, T], delay: Duration, *, priority: int = 0, connection: Any = None
    ) -> SyncJobHandle[T]: ...

    def enqueue_after(
        self, job: Job[Q, Any], delay: Duration, *, priority: int = 0, connection: Any = None
    ) -> EnqueueResult:
        """Enqueue ``job`` to be delivered after ``delay`` (string, ``timedelta`` or seconds;
        0 = now) at ``priority`` (as for ``enqueue``). Returns what ``enqueue`` returns.

        Raises:
            TypeError: ``job`` belongs to another queue set.
            ValueError: ``priority`` is out of its queue's range.
            PayloadError: a field is not JSON every backend stores alike.
            ConfigError: ``delay`` does not parse, is negative, or is longer than the backend
                can hold; or as for ``enqueue``.
            BackendError: the backend refused it.
        """
        envelope = self._envelope(job, priority)
        wait = self._delay(delay, "enqueue_after delay")
        return self._one(job, envelope, wait, connection_for(self.backend, connection))

    @overload
    def defer(  # type: ignore[overload-overlap]
        self, job: Job[Q, NoResult], delay: Duration
    ) -> EnqueueResult: ...

    @overload
    def defer(self, job: Job[Q, T], delay: Duration) -> SyncJobHandle[T]: ...

    def defer(self, job: Job[Q, Any], delay: Duration) -> EnqueueResult:
        """Hold ``job`` for ``delay``, then deliver it at its queue's top priority, ahead of the
        backlog. Returns what ``enqueue`` returns (a unique job is published with its key,
        due after ``delay``).

        Raises:
            TypeError: ``job`` belongs to another queue set.
            PayloadError: a field is not JSON every backend stores alike.
            ConfigError: ``delay`` does not parse, is negative, or is longer than the backend
                can hold; or as for ``enqueue``.
            UnknownQueueError: (RabbitMQ) the queue was never declared by this backend.
        """
        envelope = self._deferred(job)
        wait = self._delay(delay, "defer delay")
        if type(job).__queuey_unique__ is not None:
            (result,) = self._unique([envelope], [unique_key_of(job)], wait, None)
            return self._typed(job, result)
        with self.sending([envelope]):
            self.backend.defer(envelope, wait)
        return self._typed(job, EnqueueResult(envelope.job_id))

    def enqueue_many(
        self,
        jobs: Sequence[Job[Q, Any]],
        *,
        delay: Duration | None = None,
        priority: int = 0,
        connection: Any = None,
    ) -> list[EnqueueResult]:
        """Enqueue ``jobs`` all or none (one round trip on PostgreSQL), each at ``priority``
        (as for ``enqueue``).

        Returns:
            One ``EnqueueResult`` per job, in order, as the async ``enqueue_many``'s.

        Raises:
            TypeError: a job belongs to another queue set (nothing is enqueued).
            ValueError: ``priority`` is out of a job's queue's range (nothing is enqueued).
            PayloadError: a job's field is not JSON every backend stores alike.
            ConfigError: ``delay`` does not parse, is negative, or is longer than the backend
                can hold; or a job is unique and the backend cannot refuse duplicates.
            BackendError: the backend refused them.
        """
        wait = self._delay(delay, "enqueue_many delay")
        envelopes = self._envelopes(jobs, priority)
        if not envelopes:
            return []
        joined = connection_for(self.backend, connection)
        classes = job_classes(jobs, envelopes)
        if any(cls.__queuey_unique__ is not None for cls in classes):
            keys = [unique_key_of(job) for job in jobs]
            results = self._unique(envelopes, keys, wait, joined)
        else:
            with self.sending(envelopes):
                self.backend.publish(envelopes, wait, connection=joined)
            results = inserted(envelopes)
        if any(cls.__queuey_result__ is not None for cls in classes):
            return [self._typed(job, result) for job, result in zip(jobs, results, strict=True)]
        return results

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
            BackendError: the backend could not be asked.
        """
        if not isinstance(self.backend, SyncJobLookup):
            raise NotSupportedError(f"{type(self.backend).__name__} cannot look a job up by id")
        return self.backend.job(job_id)

    def enqueue_workflow(self, flow: Workflow[T]) -> SyncJobHandle[T]:
        """As the async ``Producer.enqueue_workflow``, blocking: store every step of ``flow``
        at once and return the handle of its last step.

        Raises:
            TypeError, ConfigError, PayloadError, BackendError: as for the async one.
            NotSupportedError: the backend cannot run workflows (RabbitMQ, and
                ``SyncPostgresBackend``: use ``ThreadedBackend`` over ``PostgresBackend``);
                nothing was stored.
        """
        backend = self.backend
        if not isinstance(backend, SyncWorkflowBackend):
            raise workflows_refused(backend)
        workflow_id = str(uuid.uuid4())
        headers = {WORKFLOW_HEADER: workflow_id}
        with workflow_sending(self.sending, workflow_id, len(flow.nodes), headers):
            rows, edges = self._workflow_rows(flow, headers)
            backend.start_workflow(workflow_id, rows, edges)
        adapter = flow.last.job_class.__queuey_result__ or _adapter(Any)
        handle = SyncJobHandle(flow.last.job_id, backend, adapter)
        handle.workflow_id = workflow_id
        return handle

    def cancel_workflow(self, workflow_id: str) -> WorkflowCancel:
        """As the async ``Producer.cancel_workflow``, blocking (``ThreadedBackend`` over
        PostgreSQL or memory).

        Raises:
            NotSupportedError: the backend runs no workflows; ConfigError, BackendError: as
                for the async one.
        """
        return self._threaded().cancel_workflow(workflow_id)

    def workflow(self, workflow_id: str) -> WorkflowInfo | None:
        """As the async ``Producer.workflow``, blocking.

        Raises:
            NotSupportedError, ConfigError, BackendError: as for ``cancel_workflow``.
        """
        return self._threaded().workflow(workflow_id)

    def _threaded(self) -> ThreadedBackend:
        if not isinstance(self.backend, ThreadedBackend):
            raise workflows_refused(self.backend)
        return self.backend

    def result(self, job_id: str, result_type: type[T], *, timeout: Duration | None = None) -> T:
        """As the async ``Producer.result``, blocking the calling thread.

        Raises:
            JobFailedError, ResultTimeoutError, UnknownJobError, ResultError, BackendError: as
                for the async ``Producer.result``.
            NotSupportedError: the sync backend cannot wait for results
                (``SyncPostgresBackend``: use ``ThreadedBackend`` over ``PostgresBackend``).
        """
        adapter: TypeAdapter[T] = _adapter(cast(Any, result_type))
        return wait_result(self.backend, job_id, adapter, timeout)


@lru_cache(maxsize=256)
def _adapter(result_type: Any) -> TypeAdapter[Any]:
    """A validator of ``result_type`` (built once per type)."""
    return TypeAdapter(result_type)


def _unique_backend(backend: SyncBackend, what: str) -> SyncUniqueBackend:
    """``backend`` if it enforces unique keys.

    Raises:
        ConfigError: it does not (RabbitMQ); the message names ``what`` needed it.
    """
    inner = getattr(backend, "backend", None)  # a ThreadedBackend's async backend
    if not isinstance(backend, SyncUniqueBackend) or (
        inner is not None and not isinstance(inner, UniqueBackend)
    ):
        name = type(backend if inner is None else inner).__name__
        raise ConfigError(
            f"{what}: unique jobs need PostgreSQL or memory; {name} has no way to refuse a "
            "duplicate"
        )
    return backend
