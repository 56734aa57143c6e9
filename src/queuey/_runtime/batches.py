"""Gathering deliveries of one job type into the calls of its batch handler.

Each delivery of a batched job type still runs as its own delivery (its slot, the middleware
chain, its outcome decided under its job's retry policy and settled, fenced, by its backend),
but instead of calling a handler it joins the pending batch of its type and waits for its item's
ending. The batch is called once ``size`` items are pending, or ``wait`` after its first item
joined, whichever comes first; each item then gets its own ending back (``None`` or the
exception it ended with), or the batch's exception when the handler raised.

Cancellation: an item cancelled while its batch is pending simply leaves it. An item cancelled
while its batch runs waits for the batch to end before it ends (so its job is never handed back
while the handler still works on it), unless every item of the batch was cancelled (shutdown):
then the batch itself is cancelled.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from queuey._runtime.invoke import invoke, is_coroutine_callable
from queuey.batching import BatchContext
from queuey.jobs import Job, JobContext
from queuey.retry import RetryPolicy

__all__ = ["BatchEntry", "BatchShapeError", "Batcher", "make_batch_entry"]


class BatchShapeError(TypeError):
    """A batch handler returned something other than ``None`` or one outcome per job;
    retryable (the batch's items are retried under their policy)."""


@dataclass(frozen=True)
class BatchEntry:
    """A registered batch handler: the job class, the coroutine function, its name, the
    job's effective retry policy, and the bounds (``size`` jobs, ``wait`` after the first)."""

    job_type: type[Job[Any, Any]]
    call: Callable[[list[Any], BatchContext], Any]
    name: str
    retry: RetryPolicy
    size: int
    wait: timedelta


@dataclass
class _Item:
    job: Job[Any, Any]
    context: JobContext
    ending: asyncio.Future[BaseException | None]
    batch: _Batch | None = None


@dataclass
class _Batch:
    items: list[_Item]
    live: int
    task: asyncio.Task[None] | None = field(default=None)


class Batcher:
    """The pending batch of one batch handler, and its calls.

    Args:
        entry: the batch handler.
        queue: the fully qualified queue name (``BatchContext.queue``).
        timeout: the longest one call may run (``None``: no limit); past it every item ends
            with a ``HandlerTimeoutError``.
    """

    def __init__(self, entry: BatchEntry, queue: str, timeout: timedelta | None) -> None:
        self._entry = entry
        self._queue = queue
        self._timeout = timeout
        self._pending: list[_Item] = []
        self._timer: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Task[None]] = set()

    @property
    def job_type(self) -> type[Job[Any, Any]]:
        """The job class batched here."""
        return self._entry.job_type

    @property
    def queue(self) -> str:
        """The fully qualified queue name of its job type."""
        return self._queue

    @property
    def size(self) -> int:
        """The most jobs one call takes."""
        return self._entry.size

    @property
    def wait(self) -> float:
        """Seconds a batch waits for more jobs after its first, at most."""
        return self._entry.wait.total_seconds()

    @property
    def retry(self) -> RetryPolicy:
        """The job's effective retry policy."""
        return self._entry.retry

    async def submit(self, job: Job[Any, Any], context: JobContext) -> BaseException | None:
        """Add ``job`` to the pending batch and return its ending once its batch has run.

        Raises:
            CancelledError: the calling task was cancelled (see the module's text).
        """
        loop = asyncio.get_running_loop()
        item = _Item(job, context, loop.create_future())
        self._pending.append(item)
        if len(self._pending) >= self._entry.size:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self._entry.wait.total_seconds(), self._flush)
        try:
            return await asyncio.shield(item.ending)
        except asyncio.CancelledError:
            await self._left(item)
            raise

    async def _left(self, item: _Item) -> None:
        """``item``'s task was cancelled: leave the pending batch, or wait out the running one
        (cancelling it when no item of it is left)."""
        batch = item.batch
        if batch is None:
            self._pending.remove(item)
            if not self._pending and self._timer is not None:
                self._timer.cancel()
                self._timer = None
            return
        batch.live -= 1
        if batch.task is None:  # never: the task is made as the items join the batch
            return
        if batch.live == 0:
            batch.task.cancel()
        await asyncio.wait([batch.task])

    def _flush(self) -> None:
        """Call the handler with the pending items (in a task of its own)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        items, self._pending = self._pending, []
        if not items:
            return
        batch = _Batch(items, len(items))
        for item in items:
            item.batch = batch
        batch.task = asyncio.create_task(self._call(batch))
        self._running.add(batch.task)
        batch.task.add_done_callback(self._running.discard)

    async def _call(self, batch: _Batch) -> None:
        items = batch.items
        context = BatchContext(self._queue, tuple(item.context for item in items))
        try:
            endings = await self.endings([item.job for item in items], context)
        except asyncio.CancelledError as exc:
            endings = [exc] * len(items)
        for item, ending in zip(items, endings, strict=True):
            if not item.ending.done():
                item.ending.set_result(ending)

    async def endings(self, jobs: list[Any], context: BatchContext) -> list[BaseException | None]:
        """Call the handler once with ``jobs`` (under the timeout): each job's ending, or the
        handler's exception for every job.

        Raises:
            CancelledError: the calling task was cancelled.
        """
        entry = self._entry
        try:
            returned = await invoke(
                entry.call,
                (jobs, context),
                is_async=True,
                executor=_NO_EXECUTOR,
                timeout=self._timeout,
            )
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            return [exc] * len(jobs)
        return self._checked(returned, len(jobs))

    def _checked(self, returned: object, count: int) -> list[BaseException | None]:
        """The per-item endings ``returned`` gives, or a ``BatchShapeError`` for each item."""
        if returned is None:
            return [None] * count
        if isinstance(returned, list | tuple) and len(returned) == count:
            if all(value is None or isinstance(value, BaseException) for value in returned):
                return list(returned)
        error = BatchShapeError(
            f"batch handler {self._entry.name!r} of {self._entry.job_type.job_name()!r} returned "
            f"{_shown(returned)} for {count} job(s): return None, or a list with one entry per "
            "job (None for success, else the exception that job ended with)"
        )
        return [error] * count


def _shown(value: object) -> str:
    if isinstance(value, list | tuple):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def make_batch_entry(
    job_type: type[Job[Any, Any]], target: object, size: int, wait: timedelta
) -> BatchEntry:
    """Wrap the coroutine function ``target`` (or an object whose ``handle`` is one) as the
    batch handler of ``job_type``.

    Raises:
        TypeError: ``target`` is not a coroutine function (nor has one as ``handle``), or
            ``job_type`` declares a result type.
    """
    call: Any = getattr(target, "handle", target)
    if inspect.isclass(target) or not is_coroutine_callable(call):
        raise TypeError(
            f"batch handler {_name(target)!r} of {job_type.job_name()!r} must be an async "
            "function (or an object whose `handle` is one) taking (jobs, ctx)"
        )
    if job_type.__queuey_result__ is not None:
        raise TypeError(
            f"{job_type.job_name()!r} declares a result type: give it a handler per job "
            "(@worker.handler), since a batch handler returns outcomes, not results"
        )
    return BatchEntry(job_type, call, _name(target), job_type.effective_retry(), size, wait)


def _name(target: object) -> str:
    return str(getattr(target, "__qualname__", type(target).__qualname__))


class _NoExecutor:
    """Batch handlers are coroutine functions: nothing runs in an executor."""

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a batch handler never runs in an executor")


_NO_EXECUTOR: Any = _NoExecutor()
