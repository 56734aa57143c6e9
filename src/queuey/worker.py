"""``Worker[Q]``: consumes the queues of one ``QueueSet`` and runs a handler per job type.

Shutdown order (seed ``001``, SEEDS-DIGEST §2.7): stop pulling, finish what was pulled, await
what runs, then return; the backend is closed only with ``close_backend_on_shutdown=True``.
Each outcome is logged on the ``queuey.worker`` logger with ``job_id``, ``job_type``, ``queue``
and ``attempt`` as structured fields (``extra``): success at INFO, a retry or deferral at
WARNING/INFO, a dead letter at ERROR.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from queuey._outcome import Ack, DeadLetter, DeferFor, Outcome, RetryAfter
from queuey._runtime.execute import execute
from queuey._runtime.handlers import HandlerEntry, make_entry
from queuey.backends.base import Backend, Consumer, Delivery
from queuey.durations import Duration, parse_duration
from queuey.envelope import Envelope
from queuey.errors import ConfigError, DuplicateHandlerError
from queuey.jobs import Job, Q
from queuey.queues import Queue, QueueConfig

__all__ = ["QueueStats", "Worker"]

log = logging.getLogger("queuey.worker")
H = TypeVar("H")


@dataclass
class QueueStats:
    """Outcomes a worker observed on one queue.

    ``acked`` counts deliveries that ended in an ack, a retry or a deferral (each hands its
    delivery back, as seed ``001``'s memory backend counts).
    """

    succeeded: int = 0
    retried: int = 0
    deferred: int = 0
    dead: int = 0

    @property
    def acked(self) -> int:
        """Successes + retries + deferrals."""
        return self.succeeded + self.retried + self.deferred


class Worker(Generic[Q]):
    """Consumes ``queue_set``'s queues on ``backend`` and dispatches to handlers.

    Args:
        queue_set: the ``QueueSet`` class whose jobs this worker handles.
        backend: the transport.
        queues: the subset of queues to consume (default: all of the set).
        concurrency: jobs run at once (default: the sum of the consumed queues' prefetch).
        job_timeout: a handler running longer fails with a retryable timeout (duration string,
            ``timedelta`` or seconds; not zero).
        shutdown_grace: how long shutdown waits for running jobs before cancelling them
            (default: no limit). A cancelled job is redelivered later (at-least-once).
        close_backend_on_shutdown: close ``backend`` when ``run`` returns (default false).

    Attributes:
        stats: per queue name, the outcomes this worker observed (``QueueStats``).
        dead_letters: the last 100 ``(envelope, reason)`` pairs this worker dead-lettered.

    Raises:
        ConfigError: a queue of another set, a non-positive concurrency or a zero duration.
    """

    def __init__(
        self,
        queue_set: type[Q],
        backend: Backend,
        *,
        queues: Sequence[Queue] | None = None,
        concurrency: int | None = None,
        job_timeout: Duration | None = None,
        shutdown_grace: Duration | None = None,
        close_backend_on_shutdown: bool = False,
    ) -> None:
        self.queue_set = queue_set
        self.backend = backend
        self.queues = _select_queues(queue_set, queues)
        default = sum(queue.config.prefetch for queue in self.queues)
        self.concurrency = default if concurrency is None else concurrency
        if self.concurrency < 1:
            raise ConfigError(f"concurrency: must be >= 1, got {self.concurrency}")
        self.job_timeout = (
            None if job_timeout is None else parse_duration(job_timeout, "job_timeout")
        )
        self.shutdown_grace = (
            None if shutdown_grace is None else parse_duration(shutdown_grace, "shutdown_grace")
        )
        self.close_backend_on_shutdown = close_backend_on_shutdown
        self.stats: dict[str, QueueStats] = {q.name: QueueStats() for q in self.queues}
        self.dead_letters: deque[tuple[Envelope, str]] = deque(maxlen=100)
        self._handlers: dict[str, HandlerEntry] = {}
        self._settle_failures = 0
        self._stop = asyncio.Event()
        self._force = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._running = False

    @property
    def settle_failures(self) -> int:
        """Outcomes the backend could not record (each logged at ERROR; the job comes again)."""
        return self._settle_failures

    @property
    def in_flight(self) -> int:
        """Deliveries being handled now."""
        return len(self._tasks)

    def handler(self, job_type: type[Job[Q]]) -> Callable[[H], H]:
        """Decorator registering a function or class as the handler of ``job_type``.

        Raises:
            TypeError: ``job_type`` belongs to another queue set, or the handler's first
                parameter is annotated with another job class.
            DuplicateHandlerError: ``job_type`` already has a handler.
        """

        def register(target: H) -> H:
            self.register(job_type, target)
            return target

        return register

    def register(self, job_type: type[Job[Q]], target: object) -> None:
        """Register ``target`` (function, class with ``handle``, or object with ``handle``).

        Raises:
            TypeError, DuplicateHandlerError: as for ``handler``.
        """
        queue = (
            job_type.job_queue()
            if isinstance(job_type, type) and issubclass(job_type, Job)
            else None
        )
        if queue is None or queue.queue_set is not self.queue_set:
            raise TypeError(f"{job_type!r} is not a job of {self.queue_set.__name__}")
        name = job_type.job_name()
        if name in self._handlers:
            raise DuplicateHandlerError(name)
        self._handlers[name] = make_entry(job_type, target)

    def shutdown(self, *, force: bool = False) -> None:
        """Ask ``run`` to stop: stop pulling, finish what was pulled and what runs, return.

        Idempotent; may be called before ``run``. With ``force=True`` (a second SIGINT/SIGTERM
        under ``queuey worker``) running jobs are cancelled at once and handed back to the
        backend, to be delivered again (at-least-once).
        """
        self._stop.set()
        if force:
            self._force.set()

    async def run(self) -> None:
        """Declare the queues, consume until ``shutdown``, then shut down gracefully.

        Raises:
            BackendError: declaring failed, or a consumer could not go on.
            SchemaError: (PostgreSQL) the schema needs ``queuey db migrate``.
            RuntimeError: ``run`` is already running.
        """
        if self._running:
            raise RuntimeError("this worker is already running")
        self._running = True
        configs = [queue.config for queue in self.queues]
        executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="queuey-handler")
        try:
            await self.backend.declare(configs)
            await self._consume(configs, executor)
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
            self._running = False
            if self.close_backend_on_shutdown:
                await self.backend.close()

    async def _consume(self, configs: list[QueueConfig], executor: ThreadPoolExecutor) -> None:
        # One fetcher per queue. A fetcher takes a concurrency slot only once it holds a
        # delivery, so an idle queue never holds a slot that a busy one needs; waiting fetchers
        # get slots in turn (the semaphore is FIFO), so no queue starves another.
        slots = asyncio.Semaphore(self.concurrency)
        consumers = [(self.backend.consumer(config), config) for config in configs]
        fetchers = [
            asyncio.create_task(self._fetch(consumer, config, slots, executor))
            for consumer, config in consumers
        ]
        stopper = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait([*fetchers, stopper], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            for consumer, _ in consumers:
                await consumer.stop()
            results = await asyncio.gather(*fetchers, return_exceptions=True)
            await self._await_in_flight()
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _fetch(
        self,
        consumer: Consumer,
        config: QueueConfig,
        slots: asyncio.Semaphore,
        executor: ThreadPoolExecutor,
    ) -> None:
        while (delivery := await consumer.next()) is not None:
            await slots.acquire()
            task = asyncio.create_task(self._process(delivery, config, executor))
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._done, slots))

    def _done(self, slots: asyncio.Semaphore, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        slots.release()
        if not task.cancelled() and task.exception() is not None:
            log.error("job processing crashed", exc_info=task.exception())

    async def _await_in_flight(self) -> None:
        if not self._tasks:
            return
        grace = None if self.shutdown_grace is None else self.shutdown_grace.total_seconds()
        forced = asyncio.ensure_future(self._force.wait())
        finished = asyncio.ensure_future(asyncio.wait(set(self._tasks)))
        await asyncio.wait([finished, forced], timeout=grace, return_when=asyncio.FIRST_COMPLETED)
        forced.cancel()
        finished.cancel()
        late = {task for task in self._tasks if not task.done()}
        for task in late:
            task.cancel()
        if late:
            log.warning("shutdown grace passed; %d job(s) cancelled, to be redelivered", len(late))
            await asyncio.wait(late)

    async def _process(
        self, delivery: Delivery, config: QueueConfig, executor: ThreadPoolExecutor
    ) -> None:
        envelope = delivery.envelope
        entry = self._handlers.get(envelope.job_type)
        try:
            outcome, _ = await execute(envelope, entry, config, self.job_timeout, executor)
        except asyncio.CancelledError:
            await _release(delivery)
            raise
        fields = {
            "job_id": envelope.job_id,
            "job_type": envelope.job_type,
            "queue": envelope.queue,
            "attempt": envelope.attempt,
        }
        try:
            await _settle(delivery, outcome)
        except Exception as exc:
            self._settle_failures += 1
            log.error("could not record the outcome: %s", exc, extra=fields)
            return
        self._count(envelope.queue, outcome)
        if isinstance(outcome, DeadLetter):
            self.dead_letters.append((envelope, outcome.reason))
        _log_outcome(outcome, fields)

    def _count(self, queue: str, outcome: Outcome) -> None:
        stats = self.stats.setdefault(queue, QueueStats())
        if isinstance(outcome, Ack):
            stats.succeeded += 1
        elif isinstance(outcome, RetryAfter):
            stats.retried += 1
        elif isinstance(outcome, DeferFor):
            stats.deferred += 1
        else:
            stats.dead += 1


async def _settle(delivery: Delivery, outcome: Outcome) -> None:
    if isinstance(outcome, Ack):
        await delivery.ack()
    elif isinstance(outcome, RetryAfter):
        await delivery.retry(outcome.envelope, outcome.delay, outcome.error)
    elif isinstance(outcome, DeferFor):
        await delivery.defer(outcome.envelope, outcome.delay)
    else:
        await delivery.dead_letter(outcome.reason)


async def _release(delivery: Delivery) -> None:
    try:
        await asyncio.shield(delivery.release())
    except Exception as exc:  # the lease will hand it back instead
        log.warning("could not release job %s: %s", delivery.envelope.job_id, exc)


def _log_outcome(outcome: Outcome, fields: dict[str, Any]) -> None:
    if isinstance(outcome, Ack):
        log.info("job succeeded", extra=fields)
    elif isinstance(outcome, RetryAfter):
        log.warning(
            "job failed; retry in %.3fs: %s",
            outcome.delay.total_seconds(),
            outcome.error,
            extra=fields,
        )
    elif isinstance(outcome, DeferFor):
        log.info(
            "job deferred for %.3fs: %s",
            outcome.delay.total_seconds(),
            outcome.reason,
            extra=fields,
        )
    elif isinstance(outcome, DeadLetter):
        log.error("job dead-lettered: %s", outcome.reason, extra=fields)


def _select_queues(queue_set: type[Q], queues: Sequence[Queue] | None) -> list[Queue]:
    if queues is None:
        return list(queue_set.all())
    chosen: list[Queue] = []
    for queue in queues:
        if not isinstance(queue, Queue) or queue.queue_set is not queue_set:
            raise ConfigError(f"queues: {queue!r} is not a queue of {queue_set.__name__}")
        if queue not in chosen:
            chosen.append(queue)
    if not chosen:
        raise ConfigError("queues: a worker needs at least one queue")
    return chosen
