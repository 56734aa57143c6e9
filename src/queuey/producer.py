"""``Producer[Q]``: enqueues jobs of one ``QueueSet`` through a backend.

``enqueue`` accepts only ``Job[Q, Any]`` instances, so ``mypy --strict`` rejects a job of another
queue set; the same check runs at runtime (``TypeError``) before anything is published. The
envelope building is ``ProducerBase``'s, shared with the sync twin ``queuey.sync.Producer``.

Before anything is written, every enqueue also checks that each job's payload is JSON every
backend stores alike (``_payload``: a ``PayloadError`` naming the job type and the field) and
that a delay is one the backend can hold (a ``ConfigError`` naming it: at most
``Backend.max_delay``, itself at most ``MAX_DURATION``).

Every enqueue answers with an ``EnqueueResult``: the job id (a ``str``) that also says whether
a job was inserted. Only a job whose class declares ``unique=`` can be refused; it goes
through the backend's ``publish_unique`` (PostgreSQL and memory), every other job through the
plain ``publish``, exactly as before.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from functools import lru_cache
from typing import Any, TypeVar, cast, overload

from pydantic import TypeAdapter

from queuey._job_batch import inserted, job_classes
from queuey._runtime.producer_base import ProducerBase, sending_for, workflow_sending
from queuey.backends.base import (
    Backend,
    CancelResult,
    JobInfo,
    JobLookup,
    ResultBackend,
    UniqueBackend,
)
from queuey.backends.steps import WORKFLOW_HEADER, WorkflowBackend, workflows_refused
from queuey.backends.workflow_ops import WorkflowCancel, WorkflowInfo, WorkflowOps
from queuey.batches import BatchProducing
from queuey.durations import Duration
from queuey.envelope import Envelope
from queuey.errors import ConfigError, NotSupportedError
from queuey.jobs import Job, NoResult, Q, unique_key_of
from queuey.queues import QueueSet
from queuey.results import JobHandle, await_result
from queuey.unique import EnqueueResult, UniqueKey
from queuey.workflows import Workflow

__all__ = ["Producer", "unique_backend", "unique_jobs"]

T = TypeVar("T")


def unique_backend(backend: Backend, what: str) -> UniqueBackend:
    """``backend`` if it enforces unique keys.

    Raises:
        ConfigError: it does not (RabbitMQ); the message names ``what`` needed it.
    """
    if not isinstance(backend, UniqueBackend):
        raise ConfigError(
            f"{what}: unique jobs need PostgreSQL or memory; {type(backend).__name__} has no "
            "way to refuse a duplicate"
        )
    return backend


def unique_jobs(queue_set: type[QueueSet]) -> list[str]:
    """The names of the job classes of ``queue_set`` that declare ``unique=``."""
    found, stack = [], list(Job.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        queue = cls.__queuey_queue__
        if queue is not None and queue.queue_set is queue_set and cls.__queuey_unique__:
            found.append(cls.__qualname__)
    return sorted(set(found))


class Producer(ProducerBase[Q], BatchProducing):
    """Enqueues jobs of ``queue_set``. Build with ``await Producer.create(...)`` (declares every
    queue of the set) or ``Producer.undeclared(...)`` (declares nothing)."""

    def __init__(self, queue_set: type[Q], backend: Backend, *, tracing: object = False) -> None:
        self.queue_set = queue_set
        self.backend = backend
        self.sending = sending_for(backend, tracing)
        self.keeps_results = isinstance(backend, ResultBackend)

    @classmethod
    async def create(
        cls, queue_set: type[Q], backend: Backend, *, tracing: object = False
    ) -> Producer[Q]:
        """A producer whose queues are declared on ``backend``; with ``tracing`` (``True``
        for the global OpenTelemetry tracer provider, or a ``TracerProvider``; the ``otel``
        extra) each enqueue is a PRODUCER span whose trace context travels in the envelope's
        headers to every run of the job (``enqueue_many``: one span for the call).

        Raises:
            ConfigError: a job class of the set declares ``unique=`` and ``backend`` cannot
                refuse duplicates (RabbitMQ).
            BackendError: the declaration failed.
            SchemaError: (PostgreSQL) the schema needs ``queuey db migrate``.
        """
        declaring = unique_jobs(queue_set)
        if declaring:
            unique_backend(backend, ", ".join(declaring))
        await backend.declare([queue.config for queue in queue_set.all()])
        return cls(queue_set, backend, tracing=tracing)

    @classmethod
    def undeclared(
        cls, queue_set: type[Q], backend: Backend, *, tracing: object = False
    ) -> Producer[Q]:
        """A producer that declares nothing (on RabbitMQ it cannot ``defer``)."""
        return cls(queue_set, backend, tracing=tracing)

    async def _unique(
        self,
        envelopes: Sequence[Envelope],
        keys: list[UniqueKey | None],
        delay: timedelta | None,
        connection: Any,
    ) -> list[EnqueueResult]:
        backend = unique_backend(self.backend, envelopes[0].job_type)
        with self.sending(envelopes):
            return await backend.publish_unique(envelopes, keys, delay, connection=connection)

    @overload
    async def enqueue(  # type: ignore[overload-overlap]
        self, job: Job[Q, NoResult], *, priority: int = 0, connection: Any = None
    ) -> EnqueueResult: ...

    @overload
    async def enqueue(
        self, job: Job[Q, T], *, priority: int = 0, connection: Any = None
    ) -> JobHandle[T]: ...

    async def enqueue(
        self, job: Job[Q, Any], *, priority: int = 0, connection: Any = None
    ) -> EnqueueResult:
        """Enqueue ``job`` for now.

        Args:
            job: a job of this producer's queue set.
            priority: ``0..max_priority`` of its queue (default 0); higher is delivered first.
            connection: (PostgreSQL) the caller's psycopg ``AsyncConnection``; the job then
                commits or rolls back with the caller's transaction.

        Returns:
            Its job id (a UUID string) as an ``EnqueueResult``, whose ``inserted`` is
            ``False`` when a unique job's duplicate was refused (the id is then the existing
            job's); for a job that declares a result type ``R``, a ``JobHandle[R]`` (also an
            ``EnqueueResult``) whose ``await handle.result()`` waits for it.

        Raises:
            TypeError: ``job`` belongs to another queue set.
            ValueError: ``priority`` is out of its queue's range (the message names both).
            PayloadError: a field is not JSON every backend stores alike (NaN, a lone
                surrogate...); nothing was enqueued.
            ConfigError: ``job`` is unique and the backend cannot refuse duplicates.
            NotSupportedError: ``job`` declares a result type and the backend keeps no
                results (RabbitMQ); nothing was enqueued.
            BackendError: the backend refused it; nothing was enqueued.
        """
        envelope = self._envelope(job, priority)
        if type(job).__queuey_unique__ is not None:
            (result,) = await self._unique([envelope], [unique_key_of(job)], None, connection)
            return self._typed(job, result)
        with self.sending([envelope]):
            await self.backend.publish([envelope], connection=connection)
        if type(job).__queuey_result__ is not None:
            return self._typed(job, EnqueueResult(envelope.job_id))
        return EnqueueResult(envelope.job_id)

    def _typed(self, job: Job[Q, Any], result: EnqueueResult) -> EnqueueResult:
        """``result`` as a ``JobHandle`` when ``job`` declares a result type."""
        adapter = type(job).__queuey_result__
        if adapter is None:
            return result
        return JobHandle(result.job_id, self.backend, adapter, result.outcome)

    @overload
    async def enqueue_after(  # type: ignore[overload-overlap]
        self, job: Job[Q, NoResult], delay: Duration, *, priority: int = 0, connection: Any = None
    ) -> EnqueueResult: ...

    @overload
    async def enqueue_after(
        self, job: Job[Q, T], delay: Duration, *, priority: int = 0, connection: Any = None
    ) -> JobHandle[T]: ...

    async def enqueue_after(
        self, job: Job[Q, Any], delay: Duration, *, priority: int = 0, connection: Any = None
    ) -> EnqueueResult:
        """Enqueue ``job`` to be delivered after ``delay`` (string, ``timedelta`` or seconds;
        0 = now) at ``priority`` (as for ``enqueue``). Returns what ``enqueue`` returns.

        Raises:
            TypeError: ``job`` belongs to another queue set.
            ValueError: ``priority`` is out of its queue's range.
            ConfigError: ``delay`` does not parse, is negative, or is longer than the backend
                can hold (``backend.max_delay``); or as for ``enqueue``.
            BackendError: the backend refused it.
        """
        envelope = self._envelope(job, priority)
        wait = self._delay(delay, "enqueue_after delay")
        if type(job).__queuey_unique__ is not None:
            (result,) = await self._unique([envelope], [unique_key_of(job)], wait, connection)
            return self._typed(job, result)
        with self.sending([envelope]):
            await self.backend.publish([envelope], wait, connection=connection)
        return self._typed(job, EnqueueResult(envelope.job_id))

    @overload
    async def defer(  # type: ignore[overload-overlap]
        self, job: Job[Q, NoResult], delay: Duration
    ) -> EnqueueResult: ...

    @overload
    async def defer(self, job: Job[Q, T], delay: Duration) -> JobHandle[T]: ...

    async def defer(self, job: Job[Q, Any], delay: Duration) -> EnqueueResult:
        """Hold ``job`` for ``delay``, then deliver it at its queue's top priority, ahead of the
        backlog. Returns what ``enqueue`` returns (a unique job is published with its key,
        due after ``delay``).

        Raises:
            TypeError: ``job`` belongs to another queue set.
            UnknownQueueError: (RabbitMQ) the queue was never declared by this backend.
        """
        envelope = self._deferred(job)
        wait = self._delay(delay, "defer delay")
        if type(job).__queuey_unique__ is not None:
            (result,) = await self._unique([envelope], [unique_key_of(job)], wait, None)
            return self._typed(job, result)
        with self.sending([envelope]):
            await self.backend.defer(envelope, wait)
        return self._typed(job, EnqueueResult(envelope.job_id))

    async def enqueue_many(
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
            One ``EnqueueResult`` per job, in order: a unique job refused as a duplicate (of
            an earlier job, or of one in this call) has ``inserted=False`` and the holder's id;
            a job that declares a result type gets a ``JobHandle``.

        Raises:
            TypeError: a job belongs to another queue set (nothing is enqueued).
            ValueError: ``priority`` is out of a job's queue's range (nothing is enqueued).
            ConfigError: a job is unique and the backend cannot refuse duplicates.
            BackendError: the backend refused them.
        """
        wait = self._delay(delay, "enqueue_many delay")
        envelopes = self._envelopes(jobs, priority)
        if not envelopes:
            return []
        classes = job_classes(jobs, envelopes)
        if any(cls.__queuey_unique__ is not None for cls in classes):
            keys = [unique_key_of(job) for job in jobs]
            results = await self._unique(envelopes, keys, wait, connection)
        else:
            with self.sending(envelopes):
                await self.backend.publish(envelopes, wait, connection=connection)
            results = inserted(envelopes)
        if any(cls.__queuey_result__ is not None for cls in classes):
            return [self._typed(job, result) for job, result in zip(jobs, results, strict=True)]
        return results

    async def enqueue_workflow(self, flow: Workflow[T]) -> JobHandle[T]:
        """Store every step of ``flow`` at once (its first steps due now) and return the
        handle of its last step: ``await handle.result()`` is the workflow's result, and
        ``handle.workflow_id`` the workflow's id (``workflow``, ``cancel_workflow``).

        Raises:
            TypeError: a step's job class belongs to another queue set.
            ConfigError: a step appears twice, or a step that feeds another declares no
                result type.
            PayloadError: a first step's field is not JSON every backend stores alike.
            NotSupportedError: the backend cannot run workflows (RabbitMQ);
                nothing was stored.
            BackendError: nothing was stored.
        """
        if not isinstance(self.backend, WorkflowBackend):
            raise workflows_refused(self.backend)
        workflow_id = str(uuid.uuid4())
        headers = {WORKFLOW_HEADER: workflow_id}
        with workflow_sending(self.sending, workflow_id, len(flow.nodes), headers):
            rows, edges = self._workflow_rows(flow, headers)
            await self.backend.start_workflow(workflow_id, rows, edges)
        adapter = flow.last.job_class.__queuey_result__ or _adapter(Any)
        handle = JobHandle(flow.last.job_id, self.backend, adapter)
        handle.workflow_id = workflow_id
        return handle

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job ``job_id`` (of any queue): a pending or scheduled job ends
        ``cancelled`` and never runs; a running one is told to stop (PostgreSQL: through a
        NOTIFY to its worker, whose late outcome is then refused) and ends ``cancelled``.

        Returns:
            ``"cancelled"``, ``"requested"`` (it was running) or ``"not_found"`` (no pending,
            scheduled or running job has that id; also an id that is not a job id at all).

        Raises:
            NotSupportedError: (RabbitMQ) a queued message cannot be cancelled.
            BackendError: the backend failed; nothing changed.
        """
        return await self.backend.cancel(job_id)

    async def cancel_workflow(self, workflow_id: str) -> WorkflowCancel:
        """Cancel workflow ``workflow_id`` (or the workflow of the step with that job id, e.g.
        the handle ``enqueue_workflow`` returned): pending and waiting steps end ``cancelled``,
        each running one is told as ``cancel`` tells it; ended steps stay as they are.

        Raises:
            NotSupportedError: the backend runs no workflows (RabbitMQ).
            ConfigError: (PostgreSQL) the id is not a UUID.
            BackendError: the backend failed; nothing changed.
        """
        return await self._workflow_ops().cancel_workflow(workflow_id)

    async def workflow(self, workflow_id: str) -> WorkflowInfo | None:
        """Workflow ``workflow_id`` (or that of the step with that job id) step by step: each
        step's state, parents and error; ``None`` when there is none.

        Raises:
            NotSupportedError, ConfigError, BackendError: as for ``cancel_workflow``.
        """
        return await self._workflow_ops().workflow(workflow_id)

    def _workflow_ops(self) -> WorkflowOps:
        if not isinstance(self.backend, WorkflowOps):
            raise workflows_refused(self.backend)
        return self.backend

    async def job(self, job_id: str) -> JobInfo | None:
        """Where the job ``job_id`` (an id ``enqueue`` returned) is now: its state, attempts,
        last error and due time; ``None`` when the backend has no such job (also for an id
        that is not a job id at all, such as one that is not a UUID on PostgreSQL).

        Raises:
            NotSupportedError: the backend keeps no per-job state (RabbitMQ).
            BackendError: the backend could not be asked.
        """
        if not isinstance(self.backend, JobLookup):
            name = type(self.backend).__name__
            raise NotSupportedError(f"{name} cannot look a job up by id")
        return await self.backend.job(job_id)

    async def result(
        self, job_id: str, result_type: type[T], *, timeout: Duration | None = None
    ) -> T:
        """Wait for job ``job_id`` (of any queue: an id ``enqueue`` returned, here or in
        another process) to end, and return its stored result validated as ``result_type``;
        at once when it has ended. The caller with a handle uses ``handle.result()``.

        Raises:
            JobFailedError: the job ended failed (dead-lettered) or cancelled; it carries the
                job id, the state and the last error.
            ResultTimeoutError: it had not ended within ``timeout`` (a duration; ``None``: no
                limit); the job is left alone.
            UnknownJobError: the backend has no such job (or deleted it after its retention;
                also an id that is not a job id at all).
            NotSupportedError: the backend keeps no results (RabbitMQ).
            ResultError: the stored result does not read as ``result_type`` (its ``job_id``
                set).
            BackendError: the backend could not be asked.
        """
        adapter: TypeAdapter[T] = _adapter(cast(Any, result_type))
        return await await_result(self.backend, job_id, adapter, timeout)


@lru_cache(maxsize=256)
def _adapter(result_type: Any) -> TypeAdapter[Any]:
    """A validator of ``result_type`` (built once per type: building one takes a while)."""
    return TypeAdapter(result_type)
