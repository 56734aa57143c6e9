"""``Worker[Q]``: consumes the queues of one ``QueueSet`` and runs a handler per job type.

Shutdown order (seed ``001``, SEEDS-DIGEST §2.7): stop pulling, finish what was pulled, await
what runs, then return; the backend is closed only with ``close_backend_on_shutdown=True``.
Each outcome is logged on the ``queuey.worker`` logger with ``job_id``, ``job_type``, ``queue``
and ``attempt`` as structured fields (``extra``): success at INFO, a retry or deferral at
WARNING/INFO, a dead letter at ERROR.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from queuey._outcome import Ack, DeadLetter, DeferFor, Outcome, RetryAfter
from queuey._runtime.execute import execute
from queuey._runtime.handlers import HandlerEntry, make_entry
from queuey._runtime.loop import ConsumeLoop
from queuey._runtime.settle import release, settle
from queuey.backends.base import Backend, Delivery
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
        paused: start paused: nothing is pulled until ``resume`` (publishing is unaffected).
        on_settled: called after each recorded outcome with ``(envelope, outcome, text)``,
            ``outcome`` one of ``"succeeded"``, ``"retried"``, ``"deferred"``, ``"dead"`` and
            ``text`` the error or reason ("" on success); for metrics. It must not block.

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
        paused: bool = False,
        on_settled: Callable[[Envelope, str, str], None] | None = None,
    ) -> None:
        self.queue_set = queue_set
        self.backend = backend
        self.queues = _select_queues(queue_set, queues)
        default = sum(queue.config.prefetch for queue in self.queues)
        self.concurrency = default if concurrency is None else concurrency
        if (
            isinstance(self.concurrency, bool)
            or not isinstance(self.concurrency, int)
            or (self.concurrency < 1)
        ):
            raise ConfigError(f"concurrency: must be an integer >= 1, got {concurrency!r}")
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
        self._on_settled = on_settled
        self._running = False
        self._loop = ConsumeLoop(
            backend,
            [queue.config for queue in self.queues],
            self._process,
            concurrency=self.concurrency,
            shutdown_grace=self.shutdown_grace,
            paused=paused,
        )

    @property
    def settle_failures(self) -> int:
        """Outcomes the backend could not record (each logged at ERROR; the job comes again)."""
        return self._settle_failures

    @property
    def in_flight(self) -> int:
        """Deliveries being handled now."""
        return self._loop.in_flight

    @property
    def paused(self) -> bool:
        """Whether pulling is paused (see ``pause``)."""
        return self._loop.paused

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
        self._loop.shutdown(force=force)

    def pause(self) -> None:
        """Stop pulling new jobs; those already pulled still run. Publishing is unaffected, so
        jobs wait until ``resume``. Idempotent; may be called before ``run``."""
        self._loop.pause()

    def resume(self) -> None:
        """Pull again after ``pause``. Idempotent."""
        self._loop.resume()

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
        try:
            await self.backend.declare([queue.config for queue in self.queues])
            await self._loop.run()
        finally:
            self._running = False
            if self.close_backend_on_shutdown:
                await self.backend.close()

    async def _process(self, delivery: Delivery, config: QueueConfig, executor: Executor) -> None:
        envelope = delivery.envelope
        entry = self._handlers.get(envelope.job_type)
        try:
            outcome, _ = await execute(envelope, entry, config, self.job_timeout, executor)
        except asyncio.CancelledError:
            await release(delivery)
            raise
        fields = {
            "job_id": envelope.job_id,
            "job_type": envelope.job_type,
            "queue": envelope.queue,
            "attempt": envelope.attempt,
        }
        try:
            await settle(delivery, outcome)
        except Exception as exc:
            self._settle_failures += 1
            log.error("could not record the outcome: %s", exc, extra=fields)
            return
        name, text = _name(outcome)
        stats = self.stats.setdefault(envelope.queue, QueueStats())
        setattr(stats, name, getattr(stats, name) + 1)
        if isinstance(outcome, DeadLetter):
            self.dead_letters.append((envelope, outcome.reason))
        _log_outcome(outcome, fields)
        if self._on_settled is not None:
            try:
                self._on_settled(envelope, name, text)
            except Exception:
                log.exception("on_settled callback failed", extra=fields)


def _name(outcome: Outcome) -> tuple[str, str]:
    """The outcome's name (a ``QueueStats`` field) and its text."""
    if isinstance(outcome, Ack):
        return "succeeded", ""
    if isinstance(outcome, RetryAfter):
        return "retried", outcome.error
    if isinstance(outcome, DeferFor):
        return "deferred", outcome.reason
    return "dead", outcome.reason


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
