"""The consume loop shared by the typed-job ``Worker`` and the topic ``Subscriber``.

One fetcher per queue
hands each delivery its own task, run by the ``Process`` that ``bind`` made for its queue (the
runner's, which settles it), and every delivery holds one of the worker's ``concurrency`` slots
(``_runtime.slots``) until its handler has ended (the settle that follows holds none). A
consumer that claims from a database takes its slots before it claims (``SlotAware``: it never
claims more rows than there are free slots, so a claimed row always starts at once); for any
other consumer the fetcher takes a slot once it holds a delivery, so an idle queue never holds
a slot that a busy one needs, and waiting fetchers get slots in turn, so no queue starves
another. A fetcher hands out everything its consumer has buffered without yielding to the
event loop in between.

Plain handlers run in the worker's ``HandlerThreads`` (daemon threads, ``concurrency`` of
them: never more threads than slots, so a handler never waits for a thread), or, with
``processes``, in its ``HandlerProcesses`` (as many child processes, which can be killed).

Pause takes effect at once: no handler starts while paused (running ones finish) and the
consumers are stopped. A delivery a consumer had already handed out is released untouched, so
nothing stays claimed while paused; ``resume`` opens fresh consumers. Publishing is untouched,
so messages simply wait (what ``[queues] enabled = false`` does for a topic app).

Shutdown stops pulling, finishes what was pulled and awaits what runs, up to ``shutdown_grace``;
then it cancels the handlers that can be cancelled (their deliveries are handed back) and
reports, at ERROR, the plain handlers it could not stop: their threads run on, and their jobs
are not handed back. Such a job stays held (heartbeated) while its thread runs and its outcome
is recorded when it ends: the backend's ``close`` waits for those runs (``RunKeeper``), so
closing it (``close_backend_on_shutdown=True``, ``async with``) never hands the job to another
worker while it runs here. If the process exits first, the thread ends with it and the
backend's lease hands the job over (a redelivery).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from datetime import timedelta

from queuey._outcome import describe
from queuey._runtime.batch_lanes import BatchLanes, Started
from queuey._runtime.processes import HandlerProcesses
from queuey._runtime.runner import Process, Ran
from queuey._runtime.settle import give_up, release
from queuey._runtime.slots import Slots
from queuey._runtime.threads import HandlerThreads
from queuey._waits import first_of
from queuey.backends.base import Backend, Consumer, Delivery, RunKeeper, SlotAware
from queuey.queues import QueueConfig

__all__ = ["Bind", "ConsumeLoop"]

log = logging.getLogger("queuey.worker")

Bind = Callable[[QueueConfig, Executor, Ran], Process]
"""Makes the ``Process`` of one queue's deliveries, plain handlers running in the executor,
telling ``Ran`` when a delivery's handler has ended (``Runner.bind``); called once per consumer
session."""

Lanes = Callable[[QueueConfig, Consumer, Ran, Started], BatchLanes | None]
"""Makes the batch path of one queue's consumer, if it applies (``Runner.lanes``)."""

InThread = Callable[[Delivery], bool]
"""Whether a thread is running a plain handler for the delivery now (``Runner.in_thread``)."""


class ConsumeLoop:
    """Consumes ``configs`` on ``backend`` and hands each delivery to its queue's ``Process``.

    Args:
        backend: the transport.
        configs: the queues (or topics) to consume, one consumer each.
        bind: makes each queue's ``Process``, once per consumer session. A ``Process``
            that raises (a bug) is logged and its delivery dead-lettered.
        concurrency: deliveries handled at once, and threads for plain handlers (>= 1).
        shutdown_grace: how long shutdown waits for running handlers before cancelling them
            (``None``: no limit).
        paused: start paused (nothing is pulled until ``resume``).
        thread_name_prefix: names the handler threads.
        in_thread: whether a thread runs a delivery's plain handler now (such a delivery is
            never cancelled and handed back by shutdown); by default none is.
        processes: plain handlers run in ``concurrency`` child processes
            (``HandlerProcesses``, which can be killed) instead of threads.
        lanes: makes each consumer's batch path (``_runtime.batch_lanes``): a delivery it
            takes runs in a batch task instead of a task of its own.

    Attributes:
        configs: the queues consumed from the next consumer session on.
    """

    def __init__(
        self,
        backend: Backend,
        configs: Sequence[QueueConfig],
        bind: Bind,
        *,
        concurrency: int,
        shutdown_grace: timedelta | None = None,
        paused: bool = False,
        thread_name_prefix: str = "queuey-handler",
        in_thread: InThread | None = None,
        processes: bool = False,
        lanes: Lanes | None = None,
    ) -> None:
        self._backend = backend
        self._lanes = lanes
        self._batches: dict[asyncio.Task[None], list[Delivery]] = {}
        self._processes = processes
        self.configs = list(configs)
        self._bind = bind
        self._concurrency = concurrency
        self._grace = shutdown_grace
        self._thread_prefix = thread_name_prefix
        self._stop = asyncio.Event()
        self._force = asyncio.Event()
        self._paused = asyncio.Event()
        self._resumed = asyncio.Event()
        (self._paused if paused else self._resumed).set()
        self._in_thread = in_thread or (lambda delivery: False)
        self._slots = Slots(concurrency)
        self._tasks: dict[asyncio.Task[None], Delivery] = {}
        self._holding: set[int] = set()  # id() of the deliveries whose handler slot is held

    @property
    def in_flight(self) -> int:
        """Deliveries being handled now."""
        return len(self._tasks) + sum(len(batch) for batch in self._batches.values())

    @property
    def paused(self) -> bool:
        """Whether pulling is paused."""
        return self._paused.is_set()

    @property
    def stopping(self) -> bool:
        """Whether ``shutdown`` was asked for."""
        return self._stop.is_set()

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
        executor: Executor = (
            HandlerProcesses(self._concurrency, self._thread_prefix)
            if self._processes
            else HandlerThreads(self._concurrency, self._thread_prefix)
        )
        try:
            while not self._stop.is_set():
                if self._paused.is_set():
                    await first_of(self._stop.wait(), self._resumed.wait())
                elif not await self._session(executor):
                    return
        finally:
            try:
                await self._await_in_flight()
            finally:
                executor.shutdown(wait=False, cancel_futures=True)

    async def _session(self, executor: Executor) -> bool:
        """Consume until paused or stopped (returns true: go on) or a consumer ends (false)."""
        consumers = [(self._consumer(config), config) for config in self.configs]
        fetchers = [
            asyncio.create_task(self._fetch(consumer, config, executor))
            for consumer, config in consumers
        ]
        interrupted = asyncio.create_task(first_of(self._stop.wait(), self._paused.wait()))
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

    def _consumer(self, config: QueueConfig) -> Consumer:
        return self._backend.consumer(config)

    async def _fetch(self, consumer: Consumer, config: QueueConfig, executor: Executor) -> None:
        process = self._bind(config, executor, self._ran)
        lanes = (
            None if self._lanes is None else self._lanes(config, consumer, self._ran, self._batch)
        )
        holds_slots = False
        if isinstance(consumer, SlotAware):
            consumer.share_slots(self._slots)
            holds_slots = True
        while (delivery := await consumer.next()) is not None:
            if not holds_slots:
                await self._slots.acquire()
            if self._paused.is_set():  # pulled just before the pause: hand it back untouched
                await release(delivery)
                self._slots.give()
                continue
            if lanes is not None and lanes.offer(delivery):
                self._holding.add(id(delivery))
                continue
            task = asyncio.create_task(_guarded(process, delivery))
            self._tasks[task] = delivery
            self._holding.add(id(delivery))
            task.add_done_callback(self._done)
        if lanes is not None:
            lanes.flush()

    def _batch(self, task: asyncio.Task[None], deliveries: list[Delivery]) -> None:
        """A batch task of the batch path started (its deliveries hold their slots)."""
        self._batches[task] = deliveries
        task.add_done_callback(self._batch_done)

    def _batch_done(self, task: asyncio.Task[None]) -> None:
        for delivery in self._batches.pop(task, ()):
            self._ran(delivery)
        if not task.cancelled() and task.exception() is not None:
            log.error("batch processing crashed", exc_info=task.exception())

    def _ran(self, delivery: Delivery) -> None:
        """The delivery's handler has ended: its slot is free while its outcome is settled."""
        if id(delivery) in self._holding:
            self._holding.discard(id(delivery))
            self._slots.give()

    def _done(self, task: asyncio.Task[None]) -> None:
        delivery = self._tasks.pop(task, None)
        if delivery is not None:
            self._ran(delivery)
        if not task.cancelled() and task.exception() is not None:
            log.error("delivery processing crashed", exc_info=task.exception())

    async def _await_in_flight(self) -> None:
        running = {*self._tasks, *self._batches}
        if not running:
            return
        grace = None if self._grace is None else self._grace.total_seconds()
        await first_of(asyncio.wait(running), self._force.wait(), timeout=grace)
        how = "forced" if self._force.is_set() else "grace passed"
        late = [task for task in running if not task.done()]
        threads = [t for t in late if t in self._tasks and self._in_thread(self._tasks[t])]
        cancelled = [task for task in late if task not in threads]
        for task in cancelled:
            task.cancel()
        if threads:
            log.error(
                "shutdown %s; %d handler thread(s) still running, their jobs stay held: each "
                "outcome is recorded when its thread ends (closing the backend waits for it), "
                "or, if the process exits first, the job will be redelivered after the lease",
                how,
                len(threads),
            )
            if isinstance(self._backend, RunKeeper):
                self._backend.keep_open_for(threads)
        if cancelled:
            log.warning(
                "shutdown %s; %d handler(s) cancelled and handed back, to be delivered again",
                how,
                len(cancelled),
            )
            await asyncio.wait(cancelled)


async def _guarded(process: Process, delivery: Delivery) -> None:
    """``process``, but a crash in it (a bug: handler and middleware failures are outcomes)
    still settles the delivery, dead-lettered with the reason, so it is never left claimed or
    redelivered forever."""
    try:
        await process(delivery)
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        log.exception("delivery processing crashed; dead-lettering it")
        await give_up(delivery, f"processing failed: {describe(exc)}")
