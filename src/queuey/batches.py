"""Batches: N jobs enqueued under one batch id, their progress readable at any time, and
callbacks enqueued when they have all ended.

```python
class Notify(Job[AppQueues, None], queue=AppQueues.web):
    batch_id: str
    failed: int

    @classmethod
    def from_batch(cls, progress: BatchProgress) -> Notify:
        return cls(batch_id=progress.batch_id, failed=progress.failed)

imports = batch(*(Import(file=f) for f in files)).on_complete(Notify.from_batch)
handle = await producer.enqueue_batch(imports)
progress = await handle.progress()          # BatchProgress: total, done, failed, pending
```

A callback is a job built by a classmethod of its job class from the batch's final
``BatchProgress`` (``mypy`` refuses a builder that takes anything else): ``on_complete`` runs
once every member has ended, whatever the outcome; ``on_success`` once every member has
succeeded (if one failed, it ends ``cancelled`` saying so). Each is enqueued exactly once, in
the same transaction (PostgreSQL) as the end of the last member.

A batch grows while it runs: ``producer.batch(ctx.batch_id).add(...)`` in a member's handler.
Additions are taken only while some member has not ended; the adding member has not (it is
running), so the callbacks cannot run before its additions are counted. To add exactly once,
add inside the handler's transaction (``connection=`` of ``ctx.transaction()``, PostgreSQL):
the new members then commit with the adding member's success, or not at all.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from queuey._payload import job_payload
from queuey.backends.batches import (
    BatchBackend,
    BatchProgress,
    SyncBatchBackend,
    batches_refused,
)
from queuey.backends.steps import StepRow
from queuey.errors import BatchEndedError, ConfigError, UnknownBatchError
from queuey.jobs import Job
from queuey.workflows import step_builder

__all__ = [
    "Batch",
    "BatchHandle",
    "BatchProducing",
    "BatchProgress",
    "SyncBatchHandle",
    "SyncBatchProducing",
    "batch",
]

Builder = Callable[[BatchProgress], Job[Any, Any]]
"""A callback's builder: a classmethod of its job class taking the batch's ``BatchProgress``."""

Target = Callable[[type[Job[Any, Any]]], tuple[str, str]]
"""A job class's ``(job name, queue name)`` for the producer's queue set."""


class Batch:
    """Jobs to enqueue as one batch, with its callbacks: built by ``batch(...)``, enqueued by
    ``producer.enqueue_batch``."""

    def __init__(
        self,
        jobs: tuple[Job[Any, Any], ...],
        success: Builder | None = None,
        complete: Builder | None = None,
    ) -> None:
        if not jobs:
            raise ConfigError("batch: give at least one job")
        for job in jobs:
            _check_member(job)
        self.jobs = jobs
        self.success = success
        self.complete = complete

    def on_success(self, builder: Callable[[BatchProgress], Job[Any, Any]]) -> Batch:
        """This batch with the callback ``builder`` makes once every member has succeeded
        (a member that failed for good, or was cancelled, cancels it instead).

        Raises:
            ConfigError: ``builder`` is not a classmethod of a job class.
        """
        step_builder(builder, "on_success")
        return Batch(self.jobs, builder, self.complete)

    def on_complete(self, builder: Callable[[BatchProgress], Job[Any, Any]]) -> Batch:
        """This batch with the callback ``builder`` makes once every member has ended,
        whatever the outcome.

        Raises:
            ConfigError: ``builder`` is not a classmethod of a job class.
        """
        step_builder(builder, "on_complete")
        return Batch(self.jobs, self.success, builder)


def batch(*jobs: Job[Any, Any]) -> Batch:
    """The jobs ``jobs`` as one batch; add callbacks with ``on_success`` / ``on_complete``.

    Raises:
        ConfigError: no job, a job is not a ``Job``, or a job is unique (a batch member is
            never refused as a duplicate).
    """
    return Batch(tuple(jobs))


def _check_member(job: object) -> None:
    if not isinstance(job, Job):
        raise ConfigError(f"batch: {job!r} is not a job; a batch's members are Job instances")
    if type(job).__queuey_unique__ is not None:
        raise ConfigError(
            f"batch: {type(job).__qualname__} is unique; a batch member is never refused as a "
            "duplicate, so enqueue unique jobs outside batches"
        )


def member_rows(jobs: Sequence[Job[Any, Any]], target: Target) -> list[StepRow]:
    """``jobs`` as the rows of batch members (due now).

    Raises:
        ConfigError: a job is not a ``Job``, or is unique.
        TypeError: a job belongs to another queue set.
        PayloadError: a field is not JSON every backend stores alike.
    """
    now_ms = time.time_ns() // 1_000_000
    rows = []
    for job in jobs:
        _check_member(job)
        name, queue = target(type(job))
        rows.append(
            StepRow(str(uuid.uuid4()), queue, name, 0, job_payload(job, name), now_ms, 0, None)
        )
    return rows


def _callback_row(builder: Builder, target: Target) -> StepRow:
    """The waiting row of the callback ``builder`` makes."""
    job_class, method = step_builder(builder, "callback")
    name, queue = target(job_class)
    step = {"builder": method, "many": False}
    return StepRow(str(uuid.uuid4()), queue, name, 0, {}, time.time_ns() // 1_000_000, 1, step)


def batch_rows(jobs: Batch, target: Target) -> tuple[list[StepRow], str | None, str | None]:
    """All rows of ``jobs`` (members, then callbacks) and the callbacks' job ids."""
    rows = member_rows(jobs.jobs, target)
    success = None if jobs.success is None else _callback_row(jobs.success, target)
    complete = None if jobs.complete is None else _callback_row(jobs.complete, target)
    callbacks = [row for row in (success, complete) if row is not None]
    ids = (
        None if success is None else success.job_id,
        None if complete is None else complete.job_id,
    )
    return [*rows, *callbacks], ids[0], ids[1]


class BatchHandle:
    """Batch ``batch_id`` of a producer's backend: read its progress, add members.

    Attributes:
        batch_id: the batch's id (a UUID string).
        job_ids: the job ids of the members it was enqueued with (by ``enqueue_batch``; empty
            for a handle made by ``producer.batch``).
    """

    def __init__(self, batch_id: str, backend: object, target: Target) -> None:
        self.job_ids: list[str] = []
        if not isinstance(backend, BatchBackend):
            raise batches_refused(backend)
        self.batch_id = batch_id
        self._backend: BatchBackend = backend
        self._target = target

    async def start(self, jobs: Batch) -> None:
        """Store ``jobs`` as this batch (``Producer.enqueue_batch`` does); all or nothing."""
        rows, success, complete = batch_rows(jobs, self._target)
        await self._backend.start_batch(self.batch_id, rows, success, complete)
        self.job_ids = [row.job_id for row in rows if not row.parents]

    async def progress(self) -> BatchProgress:
        """The batch's counts now: total, done, failed, pending (``ended`` once pending is 0).

        Raises:
            UnknownBatchError: the backend has no such batch.
            ConfigError: (PostgreSQL) the id is not a UUID.
            BackendError: the backend could not be asked.
        """
        found = await self._backend.batch_progress(self.batch_id)
        if found is None:
            raise UnknownBatchError(self.batch_id)
        return found

    async def add(self, *jobs: Job[Any, Any], connection: Any = None) -> list[str]:
        """Add ``jobs`` (due now) to the batch while some member has not ended; returns their
        job ids. ``connection``: (PostgreSQL) the caller's ``AsyncConnection``, e.g. the
        handler's ``ctx.transaction()``: the members commit with it.

        Raises:
            BatchEndedError: every member had ended (the callbacks were released), or there
                is no such batch; nothing was added.
            ConfigError: a job is unique, or not a ``Job``.
            TypeError: a job belongs to another queue set.
            BackendError: nothing was added.
        """
        rows = member_rows(jobs, self._target)
        if not rows:
            return []
        if not await self._backend.add_to_batch(self.batch_id, rows, connection=connection):
            raise BatchEndedError(self.batch_id)
        return [row.job_id for row in rows]


class SyncBatchHandle:
    """``BatchHandle`` for the synchronous producer (``queuey.sync.Producer``).

    Attributes:
        batch_id: the batch's id (a UUID string).
        job_ids: as ``BatchHandle.job_ids``.
    """

    def __init__(self, batch_id: str, backend: object, target: Target) -> None:
        self.job_ids: list[str] = []
        if not isinstance(backend, SyncBatchBackend):
            raise batches_refused(backend)
        self.batch_id = batch_id
        self._backend: SyncBatchBackend = backend
        self._target = target

    def start(self, jobs: Batch) -> None:
        """As ``BatchHandle.start``, blocking."""
        rows, success, complete = batch_rows(jobs, self._target)
        self._backend.start_batch(self.batch_id, rows, success, complete)
        self.job_ids = [row.job_id for row in rows if not row.parents]

    def progress(self) -> BatchProgress:
        """As ``BatchHandle.progress``, blocking.

        Raises:
            UnknownBatchError, ConfigError, BackendError: as ``BatchHandle.progress``.
        """
        found = self._backend.batch_progress(self.batch_id)
        if found is None:
            raise UnknownBatchError(self.batch_id)
        return found

    def add(self, *jobs: Job[Any, Any]) -> list[str]:
        """As ``BatchHandle.add`` (no caller's connection), blocking.

        Raises:
            BatchEndedError, ConfigError, TypeError, BackendError: as ``BatchHandle.add``.
        """
        rows = member_rows(jobs, self._target)
        if rows and not self._backend.add_to_batch(self.batch_id, rows):
            raise BatchEndedError(self.batch_id)
        return [row.job_id for row in rows]


class _Producing(Protocol):
    @property
    def backend(self) -> object: ...

    def _step_target(self, job_type: type[Any]) -> tuple[str, str]: ...


class BatchProducing:
    """``Producer.enqueue_batch`` and ``Producer.batch``."""

    async def enqueue_batch(self: _Producing, jobs: Batch) -> BatchHandle:
        """Store the batch ``jobs`` at once (members due now, callbacks waiting for them) and
        return its handle: ``handle.batch_id``, ``handle.job_ids``, ``await
        handle.progress()``.

        Raises:
            NotSupportedError: the backend cannot run batches (RabbitMQ); nothing stored.
            TypeError: a job's class belongs to another queue set; nothing stored.
            ConfigError, PayloadError, BackendError: nothing was stored.
        """
        handle = BatchHandle(str(uuid.uuid4()), self.backend, self._step_target)
        await handle.start(jobs)
        return handle

    def batch(self: _Producing, batch_id: str) -> BatchHandle:
        """The handle of batch ``batch_id`` (e.g. ``ctx.batch_id`` in a member's handler):
        read its progress, add members.

        Raises:
            NotSupportedError: the backend cannot run batches (RabbitMQ).
        """
        return BatchHandle(batch_id, self.backend, self._step_target)


class SyncBatchProducing:
    """``queuey.sync.Producer.enqueue_batch`` and ``.batch``."""

    def enqueue_batch(self: _Producing, jobs: Batch) -> SyncBatchHandle:
        """As the async ``Producer.enqueue_batch``, blocking.

        Raises:
            NotSupportedError: the backend cannot run batches (RabbitMQ, and
                ``SyncPostgresBackend``: use ``ThreadedBackend`` over ``PostgresBackend``).
            TypeError, ConfigError, PayloadError, BackendError: nothing was stored.
        """
        handle = SyncBatchHandle(str(uuid.uuid4()), self.backend, self._step_target)
        handle.start(jobs)
        return handle

    def batch(self: _Producing, batch_id: str) -> SyncBatchHandle:
        """The handle of batch ``batch_id``, as the async ``Producer.batch``.

        Raises:
            NotSupportedError: the backend cannot run batches.
        """
        return SyncBatchHandle(batch_id, self.backend, self._step_target)
