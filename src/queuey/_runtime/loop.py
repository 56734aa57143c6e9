"""The consume loop shared by the typed-job ``Worker`` and the topic ``Subscriber``.

Seed ``001``'s shape (SEEDS-DIGEST §2.7), without its dispatch hop: one fetcher per queue
takes a concurrency slot only once it holds a delivery, so an idle queue never holds a slot that
a busy one needs, and waiting fetchers get slots in turn (the semaphore is FIFO), so no queue
starves another; each delivery is handled in its own task by the caller's ``process`` callable,
which settles it. A fetcher hands out everything its consumer has buffered without yielding to
the event loop in between (no channel round trip per delivery).

Pause takes effect at once: no handler starts while paused (running ones finish) and the
consumers are stopped. A delivery a consumer had already handed out (a PostgreSQL consumer
claims up to ``prefetch`` at once) is released untouched, so nothing stays claimed while paused;
``resume`` opens fresh consumers. Publishing is untouched, so
messages simply wait (seed ``000``'s ``enabled = false``). Shutdown stops pulling, finishes what
was pulled and awaits what runs (up to ``shutdown_grace``, then cancels).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from queuey._outcome import describe
from queuey._runtime.settle import give_up, release
from queuey.backends.base import Backend, Consumer, Delivery
from queuey.queues import QueueConfig

__all__ = ["ConsumeLoop", "Process"]

log = logging.getLogger("queuey.worker")

Process = Callable[[Delivery, QueueConfig, Executor], Coroutine[Any, Any, None]]
"""Handles and settles one delivery; plain (blocking) handlers go to the given executor."""


class ConsumeLoop:
    """Consumes ``configs`` on ``backend`` and hands each delivery to ``process``.

    Args:
        backend: the transport.
        configs: the queues (or topics) to consume, one consumer each.
        process: handles and settles one delivery (must not raise; a raise is logged).
        concurrency: deliveries handled at once, and threads for plain handlers (>= 1).
        shutdown_grace: how long shutdown waits for running handlers before cancelling them
            (``None``: no limit).
        paused: start paused (nothing is pulled until ``resume``).
        thread_name_prefix: names the handler threads.
    """

    def __init__(
        self,
        backend: Backend,
        configs: Sequence[QueueConfig],
        process: Process,
        *,
        concurrency: int,
        shutdown_grace: timedelta | None = None,
        paused: bool = False,
        thread_name_prefix: str = "queuey-handler",
    ) -> None:
        self._backend = backend
        self._configs = list(configs)
        self._process = process
        self._concurrency = concurrency
        self._grace = shutdown_grace
        self._thread_prefix = thread_name_prefix
        self._stop = asyncio.Event()
        self._force = asyncio.Event()
        self._paused = asyncio.Event()
        self._resumed = asyncio.Event()
        (self._paused if paused else self._resumed).set()
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        """Deliveries being handled now."""
        return len(self._tasks)

    @property
    def paused(self) -> bool:
        """Whether pulling is paused."""
        return self._paused.is_set()

    def shutdown(self, *, force: bool = False) -> None:
        """Ask ``run`` to stop gracefully. Idempotent; may be called before ``run``. With
        ``force=True`` running handlers are cancelled at once and their deliveries handed
        back."""
        self._stop.set()
        if force:
            self._force.set()

    def pause(self) -> None:
        """Stop pulling new deliveries; those already pulled are still handled. Idempotent."""
        self._resumed.clear()
        self._paused.set()

    def resume(self) -> None:
        """Pull again after ``pause``. Idempotent."""
        self._paused.clear()
        self._resumed.set()

    async def run(self) -> None:
        """Consume until ``shutdown`` (or a consumer ends), then shut down gracefully.

        Raises:
            BackendError: a consumer could not go on.
        """
        executor = ThreadPoolExecutor(self._concurrency, thread_name_prefix=self._thread_prefix)
        try:
            while not self._stop.is_set():
                if self._paused.is_set():
                    await _first_of(self._stop.wait(), self._resumed.wait())
                elif not await self._session(executor):
                    return
        finally:
            try:
                await self._await_in_flight()
            finally:
                executor.shutdown(wait=False, cancel_futures=True)

    async def _session(self, executor: Executor) -> bool:
        """Consume until paused or stopped (returns true: go on) or a consumer ends (false)."""
        consumers = [(self._backend.consumer(config), config) for config in self._configs]
        fetchers = [
            asyncio.create_task(self._fetch(consumer, config, executor))
            for consumer, config in consumers
        ]
        interrupted = asyncio.create_task(_first_of(self._stop.wait(), self._paused.wait()))
        try:
            done, _ = await asyncio.wait(
                [*fetchers, interrupted], return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            interrupted.cancel()
            for consumer, _ in consumers:
                await consumer.stop()
            results = await asyncio.gather(*fetchers, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return interrupted in done

    async def _fetch(self, consumer: Consumer, config: QueueConfig, executor: Executor) -> None:
        while (delivery := await consumer.next()) is not None:
            await self._slots.acquire()
            if self._paused.is_set():  # pulled just before the pause: hand it back untouched
                await release(delivery)
                self._slots.release()
                continue
            task = asyncio.create_task(self._guarded(delivery, config, executor))
            self._tasks.add(task)
            task.add_done_callback(self._done)

    async def _guarded(self, delivery: Delivery, config: QueueConfig, executor: Executor) -> None:
        """``process``, but a crash in it (a bug, not a handler failure: those are outcomes)
        still settles the delivery, dead-lettered with the reason, so it is never left
        claimed or redelivered forever."""
        try:
            await self._process(delivery, config, executor)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("delivery processing crashed; dead-lettering it")
            await give_up(delivery, f"processing failed: {describe(exc)}")

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:
            log.error("delivery processing crashed", exc_info=task.exception())

    async def _await_in_flight(self) -> None:
        if not self._tasks:
            return
        grace = None if self._grace is None else self._grace.total_seconds()
        finished = asyncio.ensure_future(asyncio.wait(set(self._tasks)))
        forced = asyncio.ensure_future(self._force.wait())
        await asyncio.wait([finished, forced], timeout=grace, return_when=asyncio.FIRST_COMPLETED)
        finished.cancel()
        forced.cancel()
        late = {task for task in self._tasks if not task.done()}
        for task in late:
            task.cancel()
        if late:
            log.warning(
                "shutdown %s; %d handler(s) cancelled and handed back, to be delivered again",
                "forced" if self._force.is_set() else "grace passed",
                len(late),
            )
            await asyncio.wait(late)


async def _first_of(*waits: Awaitable[object]) -> None:
    """Return when the first of ``waits`` completes; cancel the others."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
