"""``Worker[Q]``: consumes the queues of one ``QueueSet`` and runs a handler per job type.

A thin assembler: the typed-job face (``_runtime.faces.job``) on the engine shared with the
topic ``Subscriber`` (``_runtime.engine``). Shutdown order:
stop pulling, finish what was pulled, await what runs, then return; the backend is closed only
with ``close_backend_on_shutdown=True``. Each outcome is logged on the ``queuey.worker`` logger
with ``job_id``, ``job_type``, ``queue`` and ``attempt`` as structured fields (``extra``):
success at INFO, a retry or deferral at WARNING/INFO, a dead letter at ERROR.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast, overload

from queuey._outcome import DEFERRALS, Deferrals
from queuey._registration import Returning
from queuey._runtime.cancellation import CANCEL_GRACE
from queuey._runtime.engine import Engine
from queuey._runtime.faces.job import JobFace
from queuey._runtime.middleware import Middleware, SettledCallback
from queuey._runtime.processes import refuse_while_starting
from queuey._runtime.scheduler import Scheduler, job_entries, running, schedule_backend
from queuey._runtime.stats import QueueStats
from queuey._validation import check_int
from queuey.backends.base import Backend
from queuey.batching import BatchHandler, JobClass
from queuey.durations import Duration, parse_duration
from queuey.envelope import Envelope
from queuey.errors import ConfigError
from queuey.jobs import Job, NoResult, Q
from queuey.limits import LimitSpec
from queuey.queues import Queue, QueueConfig, QueueSet
from queuey.schedule import Schedule

if TYPE_CHECKING:
    from queuey._runtime.metrics import Metrics

__all__ = ["Middleware", "QueueStats", "Worker"]

log = logging.getLogger("queuey.worker")

H = TypeVar("H")
J = TypeVar("J")
T = TypeVar("T")


class Worker(Engine, Generic[Q]):
    """Consumes ``queue_set``'s queues on ``backend`` and dispatches to handlers.

    A worker claims only the job types it has a handler for (PostgreSQL and memory): a job
    of another type stays pending, counted by ``queuey status`` and the dashboard, until a
    worker with its handler takes it, so a rolling deploy that brings a new job type never
    dead-letters it at an old worker. ``run`` logs, at WARNING, the job types of its queues
    (the job classes of the set imported in the process) that it has no handler for.
    RabbitMQ hands every message of a queue to each of its consumers: there a job type
    without a handler here is dead-lettered "no handler for job type ...", so give such
    workers ``queues=`` that they fully handle.

    Args:
        queue_set: the ``QueueSet`` class whose jobs this worker handles.
        backend: the transport.
        queues: the subset of queues to consume (default: all of the set).
        concurrency: jobs run at once (default: the sum of the consumed queues' prefetch); on
            PostgreSQL also the most rows claimed at once (a queue's ``prefetch`` bounds it
            further).
        job_timeout: a handler running longer fails with a retryable timeout (duration string,
            ``timedelta`` or seconds; not zero), counted from its start. A plain (``def``)
            handler in a thread cannot be stopped: its job stays held and its slot taken until
            its thread ends, then the timeout is recorded (logged at WARNING with the threads
            so stuck). In a process (``plain_handlers="process"``) it is killed at once.
        shutdown_grace: how long shutdown waits for running jobs before cancelling them
            (default: no limit). A cancelled job is redelivered later (at-least-once). A plain
            handler in a thread cannot be cancelled: its job is not handed back while its
            thread runs (an ERROR says how many); it is recorded when the thread ends (the
            backend's ``close`` waits for it, heartbeating its job), or redelivered after the
            lease once the process has exited.
        close_backend_on_shutdown: close ``backend`` when ``run`` returns (default false);
            the close waits for plain handlers still running in threads past
            ``shutdown_grace``, so their jobs are never handed to another worker meanwhile.
        paused: start paused: nothing is pulled until ``resume`` (publishing is unaffected).
        on_settled: called after each recorded outcome with ``(envelope, outcome, text)``,
            ``outcome`` one of ``"succeeded"``, ``"retried"``, ``"deferred"``, ``"dead"``,
            ``"cancelled"``, ``"lease_lost"`` and ``text`` the error or reason ("" on success);
            for metrics. It must not block.
        middleware: ``Middleware`` instances run around each job and told each outcome, after
            the built-in ones (outcome log, stats, cancellation, ``on_settled``), in order.
        schedules: ``Schedule`` values whose slots this worker fires while it runs (every
            worker given a schedule tries each slot; exactly one enqueue wins).
        cancel_grace: how long a handler whose job was cancelled while it runs may take to
            stop on its own (``ctx.cancelled``) before its task is cancelled (default 5 s).
        tracing: ``True`` (the global tracer provider) or an OpenTelemetry ``TracerProvider``:
            a CONSUMER span per run, child of the job's enqueue (the ``otel`` extra); see
            ``instrument``.
        metrics: a ``queuey.observability.Metrics`` to feed (the ``metrics`` extra).
        max_deferrals: how many times one job may ``Defer`` (default 100, >= 0); at its next
            deferral it is dead-lettered with a reason saying so.
        plain_handlers: where plain (``def``) handlers run: ``"thread"`` (default; a thread
            of this process, which cannot be stopped) or ``"process"``: ``concurrency`` child
            processes (started on first use, reused), so that a handler past ``job_timeout``,
            or cancelled past ``cancel_grace``, or running past ``shutdown_grace``, is killed
            (SIGKILL, reaped before the run ends; its slot is free again and the job retried
            under its policy, cancelled, or handed back). Cost: each run pickles the handler
            (by reference: it must be defined at module level) and its job and context across
            a pipe (about 0.05-0.4 ms more per job than a thread: ``python -m
            bench.handler_processes``); a process costs a fresh interpreter (about a second to
            start, importing the handler's module) and its memory. In the process the
            context has no run controls: ``ctx.cancelled`` is false and ``ctx.transaction()``
            raises ``NotSupportedError``. A process imports the main module again: a script
            must start its worker under ``if __name__ == "__main__":`` (without it, the
            ``Worker`` made in a starting process raises ``ConfigError``). A killed (or crashed)
            process takes the processes its handler started with it (its process group).
            Async handlers run on the event loop either way.
        min_defer: the shortest hold of a deferral (default 1 s; not zero): a shorter
            ``Defer`` (``Defer(0)`` too) holds the job this long, so a job that keeps deferring
            at the queue's top priority cannot starve the jobs behind it.

    Attributes:
        stats: per queue name, the outcomes this worker observed (``QueueStats``).
        dead_letters: the last 100 ``(envelope, reason)`` pairs this worker dead-lettered.

    Raises:
        ConfigError: a queue of another set, a concurrency that is not a whole number >= 1,
            a zero duration, a ``max_deferrals`` that is not a whole number >= 0, a member of
            ``middleware`` that is not a ``Middleware``, a ``plain_handlers`` other than
            ``"thread"`` or ``"process"``, a plain handler that does not pickle registered
            with ``plain_handlers="process"`` or in a handler process that is starting (a
            script without the ``__main__`` guard), a schedule whose job is of another set
            or whose name is taken, or schedules on a backend that cannot keep them (RabbitMQ).
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
        middleware: Sequence[Middleware] = (),
        schedules: Sequence[Schedule] = (),
        cancel_grace: Duration = CANCEL_GRACE,
        tracing: object = False,
        metrics: Metrics | None = None,
        max_deferrals: int = DEFERRALS.most,
        min_defer: Duration = DEFERRALS.min_delay,
        plain_handlers: Literal["thread", "process"] = "thread",
    ) -> None:
        self.queue_set = queue_set
        self.deferrals = Deferrals(
            check_int(max_deferrals, "max_deferrals", low=0),
            parse_duration(min_defer, "min_defer"),
        )
        self.schedules = tuple(schedules)
        self._schedule_entries = job_entries(self.schedules, queue_set, backend)
        self.cancel_grace = parse_duration(cancel_grace, "cancel_grace")
        self.queues = _select_queues(queue_set, queues)
        self.job_timeout = _duration(job_timeout, "job_timeout")
        self.shutdown_grace = _duration(shutdown_grace, "shutdown_grace")
        self.close_backend_on_shutdown = close_backend_on_shutdown
        self.plain_handlers = _plain_handlers(plain_handlers)
        processes = self.plain_handlers == "process"
        if processes:
            refuse_while_starting()
        self._face = JobFace(queue_set, self.job_timeout, self.deferrals, processes)
        self._extra = (on_settled, tuple(middleware))
        own = [] if on_settled is None else [SettledCallback(on_settled, self._face)]
        default = sum(queue.config.prefetch for queue in self.queues)
        super().__init__(
            backend,
            self._face,
            [queue.config for queue in self.queues],
            concurrency=default if concurrency is None else concurrency,
            shutdown_grace=self.shutdown_grace,
            paused=paused,
            middleware=[*own, *middleware],
            thread_name_prefix="queuey-handler",
            cancel_grace=self.cancel_grace,
            processes=processes,
        )
        if tracing or metrics is not None:
            self.instrument(tracing=tracing, metrics=metrics)

    @overload
    def handler(self, job_type: type[Job[Q, NoResult]]) -> Returning[Any]: ...

    @overload
    def handler(self, job_type: type[Job[Q, T]]) -> Returning[T]: ...

    def handler(self, job_type: type[Job[Q, Any]]) -> Any:
        """Decorator registering a function or class as the handler of ``job_type``. For a job
        that declares a result type (``Job[Set, Result]``), ``mypy --strict`` accepts only a
        function (or an object whose ``handle`` is one) returning ``Result``; at run time its
        return value is validated into ``Result`` (a value that does not validate fails the
        attempt, the error naming the field) and stored with the job's completion.

        Raises:
            TypeError: ``job_type`` belongs to another queue set, or the handler's first
                parameter is annotated with another job class.
            DuplicateHandlerError: ``job_type`` already has a handler.
        """
        return Returning[Any](lambda target: self.register(job_type, target))

    def batch_handler(
        self, job_type: JobClass[Q, J], *, size: int = 100, wait: Duration = "50ms"
    ) -> Callable[[BatchHandler[J]], BatchHandler[J]]:
        """Decorator registering an ``async def handle(jobs: list[J], ctx: BatchContext)`` as
        the batch handler of ``job_type``: it is called with up to ``size`` jobs at once, as
        soon as ``size`` are claimed or ``wait`` after the first of them (duration string,
        ``timedelta`` or seconds; not zero), and returns ``None`` (all succeeded) or one entry
        per job, in order: ``None`` for success, else the exception that job ended with
        (``Defer``, ``Fatal``, ``Retry`` or any other, decided under that job's retry policy).
        An exception raised by the handler (or its running past ``job_timeout``) ends every
        job of the batch. Each job holds one of the worker's ``concurrency`` slots, so a full
        batch needs ``concurrency`` (and, on PostgreSQL, the queue's ``prefetch``) >= ``size``.
        ``mypy --strict`` rejects a job class of another set and a handler whose list holds
        another job class.

        Raises:
            TypeError: ``job_type`` belongs to another queue set, the handler is not an
                ``async def``, or the job declares a result type.
            ConfigError: ``size`` is not a whole number >= 1, or ``wait`` is not a duration.
            DuplicateHandlerError: ``job_type`` already has a handler.
        """
        checked_size = check_int(size, "size", low=1)
        checked_wait = parse_duration(wait, "wait")

        def register(target: BatchHandler[J]) -> BatchHandler[J]:
            self._face.register_batch(
                cast("type[Job[Any, Any]]", job_type), target, checked_size, checked_wait
            )
            return target

        return register

    def register(self, job_type: type[Job[Q, Any]], target: object) -> None:
        """Register ``target`` (function, class with ``handle``, or object with ``handle``).

        Raises:
            TypeError, DuplicateHandlerError: as for ``handler``.
        """
        self._face.register(job_type, target)

    def handles(self, job_type: str) -> bool:
        """Whether this worker has a handler for the job type named ``job_type`` (a job's
        ``job_name()``): the job types it claims."""
        return any(job_type in self._face.handled(queue.config.name) for queue in self.queues)

    def replace(
        self, *, queues: Sequence[Queue] | None = None, concurrency: int | None = None
    ) -> Worker[Q]:
        """A new worker like this one (same backend, handlers, options and middleware) but
        consuming ``queues`` (default: this one's) with ``concurrency`` (default: the sum of
        those queues' prefetch). Used by ``queuey worker --queues/--concurrency``.

        Raises:
            ConfigError: as for the constructor.
        """
        on_settled, middleware = self._extra
        copy = Worker(
            self.queue_set,
            self.backend,
            queues=self.queues if queues is None else queues,
            concurrency=concurrency,
            job_timeout=self.job_timeout,
            shutdown_grace=self.shutdown_grace,
            close_backend_on_shutdown=self.close_backend_on_shutdown,
            paused=self.paused,
            on_settled=on_settled,
            middleware=middleware,
            schedules=self.schedules,
            cancel_grace=self.cancel_grace,
            tracing=self.tracing,
            metrics=self.metrics,
            max_deferrals=self.deferrals.most,
            min_defer=self.deferrals.min_delay,
            plain_handlers=self.plain_handlers,
        )
        copy._face.adopt(self._face)
        return copy

    def _consumed(self) -> list[QueueConfig]:
        """Each consumed queue narrowed to the job types handled here (none: it claims
        nothing); the job types of those queues without a handler are logged."""
        configs = []
        for config in self._configs:
            handled = self._face.handled(config.name)
            limits = config.limits + declared_limits(self.queue_set, config.name)
            configs.append(replace(config, job_types=handled, limits=limits))
            missing = [name for name in declared_job_types(self.queue_set, config.name)
                       if name not in handled]  # fmt: skip
            if missing:
                log.warning(
                    "no handler here for job type(s) %s of queue %s: this worker does not "
                    "claim them; they stay pending until a worker with their handler runs",
                    ", ".join(missing),
                    config.name,
                    extra={"queue": config.name, "job_types": missing},
                )
        return configs

    async def run(self) -> None:
        """Declare the queues, consume until ``shutdown`` (firing the schedules' slots
        meanwhile), then shut down gracefully.

        Raises:
            BackendError: declaring failed, or a consumer could not go on.
            SchemaError: (PostgreSQL) the schema needs ``queuey db migrate``.
            RuntimeError: ``run`` is already running.
        """
        with self._exclusive("worker"):
            entries = self._schedule_entries
            try:
                scheduler = Scheduler(schedule_backend(self.backend), entries) if entries else None
                async with running(scheduler):
                    await self._consume()
            finally:
                if self.close_backend_on_shutdown:
                    await self.backend.close()


def declared_job_types(queue_set: type[QueueSet], queue: str) -> list[str]:
    """The names of the job classes bound to ``queue`` (a resolved name) of ``queue_set``
    defined so far in this process, sorted."""
    return sorted({cls.job_name() for cls in _bound_jobs(queue_set, queue)})


def declared_limits(queue_set: type[QueueSet], queue: str) -> tuple[LimitSpec, ...]:
    """The flow limits of the job classes bound to ``queue`` of ``queue_set`` (their
    ``limits=`` keywords), in job name order."""
    jobs = sorted(_bound_jobs(queue_set, queue), key=lambda cls: cls.job_name())
    return tuple(spec for cls in jobs for spec in cls.job_limits())


def _bound_jobs(queue_set: type[QueueSet], queue: str) -> list[type[Job[Any, Any]]]:
    found: list[type[Job[Any, Any]]] = []
    seen: set[type] = set()
    stack: list[type] = list(Job.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        stack.extend(cls.__subclasses__())
        bound = getattr(cls, "__queuey_queue__", None)
        if isinstance(bound, Queue) and bound.queue_set is queue_set and bound.config.name == queue:
            found.append(cls)
    return found


def _plain_handlers(value: object) -> Literal["thread", "process"]:
    if value == "thread" or value == "process":
        return value
    raise ConfigError(f"plain_handlers: {value!r} is not 'thread' or 'process'")


def _duration(value: Duration | None, key: str) -> timedelta | None:
    return None if value is None else parse_duration(value, key)


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
