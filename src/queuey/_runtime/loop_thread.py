"""``ThreadedBackend``: any async ``Backend`` made a ``SyncBackend`` by running its calls on an
event loop, for ``queuey.sync.Producer`` on RabbitMQ or in memory (PostgreSQL has a real
synchronous path, ``SyncPostgresBackend``).

Each call is submitted to the loop with ``asyncio.run_coroutine_threadsafe`` and waited for, so
any number of threads may publish at once: the loop runs their calls one coroutine at a time,
as it would for concurrent tasks. The loop is either its own, on a daemon thread it starts and
stops (the backend is then opened and closed there), or one the caller runs on another thread
(a worker's loop sharing a ``MemoryBackend``), whose backend stays the caller's to open and
close. Calling it from the thread of that loop would wait forever, so it is refused.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Protocol, TypeVar, runtime_checkable

from queuey.backends.base import (
    Backend,
    CancelResult,
    JobEnd,
    JobInfo,
    JobLookup,
    ResultBackend,
    UniqueBackend,
)
from queuey.backends.batches import BatchBackend, BatchProgress, batches_refused
from queuey.backends.steps import StepEdge, StepRow, WorkflowBackend, workflows_refused
from queuey.backends.workflow_ops import WorkflowCancel, WorkflowInfo, WorkflowOps
from queuey.envelope import Envelope
from queuey.errors import BackendError, ConfigError, NotSupportedError, ShutDownError
from queuey.queues import QueueConfig
from queuey.unique import EnqueueResult, UniqueKey

__all__ = ["ThreadedBackend"]

T = TypeVar("T")


@runtime_checkable
class _Openable(Protocol):
    async def open(self) -> None: ...


class ThreadedBackend:
    """A ``SyncBackend`` over an async ``backend``. Open it with ``open()`` or ``with``.

    Args:
        backend: the async backend (not opened yet when ``loop`` is ``None``).
        loop: a running loop of another thread that ``backend`` belongs to; ``None`` starts
            a loop on a daemon thread of its own.
        timeout: how long a call may take before ``BackendError`` (seconds; default 30).
    """

    supports_transactions = False

    def __init__(
        self,
        backend: Backend,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.backend = backend
        self.timeout = timeout
        self._owns_loop = loop is None
        self._loop = loop
        self._thread: threading.Thread | None = None
        self._state = "new"
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<ThreadedBackend {self.backend!r}>"

    def open(self) -> None:
        """Start the loop thread and open the backend there (when the loop is its own).
        Idempotent.

        Raises:
            BackendError: the backend could not be opened.
            ShutDownError: this ``ThreadedBackend`` was closed.
        """
        with self._lock:
            if self._state == "closed":
                raise ShutDownError("this ThreadedBackend is closed; create a new one")
            if self._state == "open":
                return
            if self._owns_loop:
                self._start_thread()
            self._state = "open"
        if self._owns_loop and isinstance(self.backend, _Openable):
            self._call(self.backend.open())

    def _start_thread(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=loop.run_forever, name="queuey-sync-loop", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Close the backend and stop the thread (when the loop is its own). Idempotent."""
        with self._lock:
            if self._state != "open":
                self._state = "closed"
                return
            self._state = "closed"
        if not self._owns_loop or self._loop is None:
            return
        try:
            self._submit(self.backend.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(self.timeout)
            self._loop.close()

    def __enter__(self) -> ThreadedBackend:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the loop and wait for its result.

        Raises:
            ShutDownError: not open.
            RuntimeError: called from the loop's own thread (it would wait forever).
            BackendError: no result within ``timeout``.
        """
        if self._state != "open":
            work.close()
            raise ShutDownError(f"ThreadedBackend is {self._state}; open it first")
        return self._submit(work)

    def _submit(self, work: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        if loop is None:
            work.close()
            raise ShutDownError("ThreadedBackend has no loop; open it first")
        if _running_loop() is loop:
            work.close()
            raise RuntimeError(
                "queuey.sync was called from its backend's own event loop; use the async "
                "Producer there (or call the sync one from another thread)"
            )
        future = asyncio.run_coroutine_threadsafe(work, loop)
        try:
            return future.result(self.timeout)
        except TimeoutError:
            future.cancel()
            raise BackendError(f"no answer from the backend within {self.timeout:g}s") from None

    def declare(self, queues: Sequence[QueueConfig]) -> None:
        """As ``Backend.declare``."""
        self._call(self.backend.declare(queues))

    def publish(
        self,
        envelopes: Sequence[Envelope],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> None:
        """As ``Backend.publish``; a ``connection`` is refused (an async backend's connection
        belongs to its loop: use ``SyncPostgresBackend`` to join a caller's transaction).

        Raises:
            BackendError: a ``connection`` was given, or the backend failed.
        """
        if connection is not None:
            raise BackendError(
                "ThreadedBackend does not take a connection: join a caller's transaction "
                "with queuey.sync.PostgresBackend"
            )
        self._call(self.backend.publish(envelopes, delay))

    def publish_unique(
        self,
        envelopes: Sequence[Envelope],
        keys: Sequence[UniqueKey | None],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> list[EnqueueResult]:
        """As ``UniqueBackend.publish_unique``, on the loop (a ``connection`` is refused, as
        for ``publish``).

        Raises:
            ConfigError: the backend cannot refuse duplicates (RabbitMQ).
            BackendError: a ``connection`` was given, or the backend failed.
        """
        backend = self.backend
        if not isinstance(backend, UniqueBackend):
            raise ConfigError(
                f"unique jobs need PostgreSQL or memory; {type(backend).__name__} has no way "
                "to refuse a duplicate"
            )
        if connection is not None:
            raise BackendError(
                "ThreadedBackend does not take a connection: join a caller's transaction "
                "with queuey.sync.PostgresBackend"
            )
        return self._call(backend.publish_unique(envelopes, keys, delay))

    def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """As ``Backend.defer``."""
        self._call(self.backend.defer(envelope, delay))

    def cancel(self, job_id: str) -> CancelResult:
        """As ``Backend.cancel``."""
        return self._call(self.backend.cancel(job_id))

    def start_workflow(
        self, workflow_id: str, steps: Sequence[StepRow], edges: Sequence[StepEdge]
    ) -> None:
        """As ``WorkflowBackend.start_workflow``, blocking the calling thread.

        Raises:
            NotSupportedError: the backend cannot run workflows (RabbitMQ); nothing was stored.
            BackendError: nothing was stored.
            ShutDownError: not open.
        """
        if not isinstance(self.backend, WorkflowBackend):
            raise workflows_refused(self.backend)
        self._call(self.backend.start_workflow(workflow_id, steps, edges))

    def start_batch(
        self,
        batch_id: str,
        rows: Sequence[StepRow],
        on_success: str | None,
        on_complete: str | None,
    ) -> None:
        """As ``BatchBackend.start_batch``, blocking the calling thread.

        Raises:
            NotSupportedError: the backend cannot run batches (RabbitMQ); nothing was stored.
            BackendError: nothing was stored.
        """
        self._call(self._batches().start_batch(batch_id, rows, on_success, on_complete))

    def add_to_batch(self, batch_id: str, rows: Sequence[StepRow]) -> bool:
        """As ``BatchBackend.add_to_batch``, blocking the calling thread."""
        return self._call(self._batches().add_to_batch(batch_id, rows))

    def batch_progress(self, batch_id: str) -> BatchProgress | None:
        """As ``BatchBackend.batch_progress``, blocking the calling thread."""
        return self._call(self._batches().batch_progress(batch_id))

    def _batches(self) -> BatchBackend:
        if not isinstance(self.backend, BatchBackend):
            raise batches_refused(self.backend)
        return self.backend

    def wait_end(self, job_id: str, timeout: float | None) -> JobEnd | None:
        """As ``ResultBackend.wait_end``, on the loop, blocking the calling thread.

        Raises:
            NotSupportedError: the backend keeps no results (RabbitMQ).
            ShutDownError: not open.
        """
        return wait_end(self, job_id, timeout)

    def loop_for_waiting(self) -> asyncio.AbstractEventLoop:
        """The loop to wait on, from another thread.

        Raises:
            ShutDownError: not open.
            RuntimeError: called from the loop's own thread (it would wait forever).
        """
        loop = self._loop
        if self._state != "open" or loop is None:
            raise ShutDownError(f"ThreadedBackend is {self._state}; open it first")
        if _running_loop() is loop:
            raise RuntimeError("queuey.sync was called from its backend's own event loop")
        return loop

    def cancel_workflow(self, workflow_id: str) -> WorkflowCancel:
        """As ``WorkflowOps.cancel_workflow``, on the loop.

        Raises:
            NotSupportedError: the backend runs no workflows (RabbitMQ).
        """
        return self._call(self._workflow_ops().cancel_workflow(workflow_id))

    def workflow(self, workflow_id: str) -> WorkflowInfo | None:
        """As ``WorkflowOps.workflow``, on the loop.

        Raises:
            NotSupportedError: the backend runs no workflows (RabbitMQ).
        """
        return self._call(self._workflow_ops().workflow(workflow_id))

    def _workflow_ops(self) -> WorkflowOps:
        if not isinstance(self.backend, WorkflowOps):
            raise workflows_refused(self.backend)
        return self.backend

    def job(self, job_id: str) -> JobInfo | None:
        """As ``JobLookup.job``, on the loop.

        Raises:
            NotSupportedError: the backend keeps no per-job state (RabbitMQ).
        """
        if not isinstance(self.backend, JobLookup):
            raise NotSupportedError(f"{type(self.backend).__name__} cannot look a job up by id")
        return self._call(self.backend.job(job_id))


def wait_end(backend: ThreadedBackend, job_id: str, timeout: float | None) -> JobEnd | None:
    """As ``ResultBackend.wait_end`` on ``backend``'s loop, blocking the calling thread.

    Raises:
        NotSupportedError: the backend keeps no results (RabbitMQ).
    """
    inner = backend.backend
    if not isinstance(inner, ResultBackend):
        raise NotSupportedError(f"{type(inner).__name__} keeps no per-job state: no results")
    loop = backend.loop_for_waiting()
    future = asyncio.run_coroutine_threadsafe(inner.wait_end(job_id, timeout), loop)
    try:
        return future.result(None if timeout is None else timeout + backend.timeout)
    except TimeoutError:
        future.cancel()
        raise BackendError(f"no answer from the backend within {timeout:g}s") from None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
