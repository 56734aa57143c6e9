"""The typed-job face: handlers registered per job type, the payload decoded by the job's
pydantic model, a ``JobContext``, the job's ``RetryPolicy`` and the worker's ``job_timeout``.

Outcomes are logged on ``queuey.worker``: success at INFO, a retry at WARNING, a deferral at
INFO, a dead letter at ERROR. The message names the job, so any log format shows which one
(``job myapp.SendEmail 1f0e7c3a-… (myapp.emails, attempt 2) failed; retry in 0.085s: SMTP
451``), and ``job_id``, ``job_type``, ``queue`` and ``attempt`` are structured fields too.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Executor
from datetime import timedelta
from typing import Any

from pydantic import TypeAdapter, ValidationError

from queuey._outcome import (
    DEFERRALS,
    Ack,
    Cancelled,
    DeadLetter,
    DeferFor,
    Deferrals,
    LeaseLost,
    Outcome,
    RetryAfter,
    clean_text,
    decide,
)
from queuey._run_scope import RunScope, current_run
from queuey._runtime.batches import Batcher, make_batch_entry
from queuey._runtime.handlers import HandlerEntry, make_entry, portable
from queuey._runtime.invoke import run_handler, run_returning
from queuey._runtime.returned import (
    refuse_batch_transaction,
    refuse_transaction,
    result_json,
    type_name,
)
from queuey.envelope import Envelope
from queuey.errors import DuplicateHandlerError, ResultError
from queuey.jobs import Job, JobContext
from queuey.queues import QueueConfig, QueueSet
from queuey.retry import RetryPolicy
from queuey.workflows import built_job

__all__ = ["JobFace", "job_context"]

_ONE_ATTEMPT = RetryPolicy.none()


def job_context(envelope: Envelope, max_attempts: int) -> JobContext:
    """The ``JobContext`` of a run of ``envelope`` (its age read on the wall clock now), with
    the controls of the run in progress here (``run_scope``).

    Built without the dataclass's ``__init__`` (a frozen dataclass sets each of its twelve
    fields through ``object.__setattr__``): the same object at a third of the cost, which
    counts once per job. Every field is given here."""
    age_ms = max(0, time.time_ns() // 1_000_000 - envelope.enqueued_at_ms)
    context = _new(JobContext)
    vars(context).update(
        job_id=envelope.job_id,
        job_type=envelope.job_type,
        queue=envelope.queue,
        attempt=envelope.attempt,
        max_attempts=max_attempts,
        deferrals=envelope.deferrals,
        priority=envelope.priority,
        enqueued_at_ms=envelope.enqueued_at_ms,
        age=timedelta(milliseconds=age_ms),
        headers=dict(envelope.headers),
        redeliveries=envelope.redeliveries,
        run_scope=current_run(),
    )
    return context


_new = object.__new__


class JobFace:
    """Runs typed jobs of ``queue_set`` with the handlers registered here.

    Args:
        queue_set: the ``QueueSet`` whose jobs may be registered.
        timeout: the longest a handler may run (``None``: no limit); past it the run fails
            with a retryable ``HandlerTimeoutError``.
        deferrals: the bounds on a handler's ``Defer`` (count and shortest hold).
        in_processes: plain handlers run in handler processes: each must pickle.
    """

    log = logging.getLogger("queuey.worker")

    def __init__(
        self,
        queue_set: type[QueueSet],
        timeout: timedelta | None,
        deferrals: Deferrals = DEFERRALS,
        in_processes: bool = False,
    ) -> None:
        self._queue_set = queue_set
        self._timeout = timeout
        self.deferrals = deferrals
        self._in_processes = in_processes
        self._handlers: dict[str, HandlerEntry] = {}
        self._batches: dict[str, Batcher] = {}

    def register(self, job_type: type[Job[Any, Any]], target: object) -> None:
        """Make ``target`` the handler of ``job_type``.

        Raises:
            TypeError: ``job_type`` is not a job of the queue set, ``target`` is not callable,
                or its first parameter is annotated with a class ``job_type`` is not.
            DuplicateHandlerError: ``job_type`` already has a handler.
            ConfigError: plain handlers run in processes and ``target`` does not pickle.
        """
        name = self._free_name(job_type)
        entry = make_entry(job_type, target)
        if self._in_processes:
            portable(entry)
        self._handlers[name] = entry

    def register_batch(
        self, job_type: type[Job[Any, Any]], target: object, size: int, wait: timedelta
    ) -> None:
        """Make the coroutine function ``target`` the batch handler of ``job_type`` (at most
        ``size`` jobs a call, called ``wait`` after its first job at the latest).

        Raises:
            TypeError: as for ``register``; ``target`` is not an ``async def``, or the job
                declares a result type.
            DuplicateHandlerError: ``job_type`` already has a handler.
        """
        name = self._free_name(job_type)
        entry = make_batch_entry(job_type, target, size, wait)
        queue = job_type.job_queue().config.name
        self._batches[name] = Batcher(entry, queue, self._timeout)

    def _free_name(self, job_type: type[Job[Any, Any]]) -> str:
        """``job_type``'s name, checked to be a job of the set without a handler yet."""
        queue = (
            job_type.job_queue()
            if isinstance(job_type, type) and issubclass(job_type, Job)
            else None
        )
        if queue is None or queue.queue_set is not self._queue_set:
            raise TypeError(f"{job_type!r} is not a job of {self._queue_set.__name__}")
        name = job_type.job_name()
        if name in self._handlers or name in self._batches:
            raise DuplicateHandlerError(name)
        return name

    def batchers(self, queue: str) -> dict[str, Batcher]:
        """The batch handlers of ``queue``'s job types (its resolved name), by job name."""
        return {name: b for name, b in self._batches.items() if b.queue == queue}

    def handled(self, queue: str) -> tuple[str, ...]:
        """The names of the job types of ``queue`` (its resolved name) that have a handler
        here, in registration order: what this worker's consumer of ``queue`` claims."""
        types = {name: entry.job_type for name, entry in self._handlers.items()}
        types.update((name, batcher.job_type) for name, batcher in self._batches.items())
        return tuple(name for name, cls in types.items() if cls.job_queue().config.name == queue)

    def adopt(self, other: JobFace) -> None:
        """Take every handler registered on ``other`` (a worker copied with other options)."""
        self._handlers.update(other._handlers)
        self._batches.update(other._batches)

    def on_loop(self, envelope: Envelope) -> bool:
        """Whether ``envelope``'s handler runs on the event loop (an ``async def``, a batch
        handler, or none at all): its run never takes a thread."""
        entry = self._handlers.get(envelope.job_type)
        return entry is None or entry.is_async

    async def run(self, envelope: Envelope, queue: QueueConfig, executor: Executor) -> Outcome:
        """Decode the job, call its handler under the timeout and decide (see ``Face.run``)."""
        entry = self._handlers.get(envelope.job_type)
        if entry is None:
            batcher = self._batches.get(envelope.job_type)
            if batcher is not None:
                return await self._batched(batcher, envelope, queue)
            return DeadLetter(clean_text(f"no handler for job type `{envelope.job_type}`"))
        job = _decoded(entry.job_type, envelope.payload)
        if isinstance(job, DeadLetter):
            return job
        policy = entry.retry
        args: tuple[Any, ...] = (job,)
        if entry.takes_context:  # a handler that takes only the job gets no context built
            args = (job, job_context(envelope, policy.max_attempts))
        if entry.result is not None:
            returning = (entry, entry.result, args, envelope)
            return await self._returning(*returning, queue.top_priority, executor)
        error = await run_handler(
            entry.call,
            args,
            is_async=entry.is_async,
            executor=executor,
            timeout=self._timeout,
        )
        return decide(envelope, error, policy, queue.top_priority, None, self.deferrals)

    async def _batched(self, batcher: Batcher, envelope: Envelope, queue: QueueConfig) -> Outcome:
        """Decode the job, run it in its type's next batch and decide its item's ending."""
        job = _decoded(batcher.job_type, envelope.payload)
        if isinstance(job, DeadLetter):
            return job
        policy = batcher.retry
        context = job_context(envelope, policy.max_attempts)
        scope = context.run_scope
        if scope is not None:  # each job completes with its own outcome, not in a transaction
            refuse = refuse_batch_transaction
            vars(context)["run_scope"] = RunScope(scope.cancel, refuse, scope.report)
        error = await batcher.submit(job, context)
        return decide(envelope, error, policy, queue.top_priority, None, self.deferrals)

    async def _returning(
        self,
        entry: HandlerEntry,
        adapter: TypeAdapter[Any],
        args: tuple[Any, ...],
        envelope: Envelope,
        top_priority: int,
        executor: Executor,
    ) -> Outcome:
        """Run the handler of a job that declares a result type (``args``: the job, and its
        context when the handler takes one): its return value, validated and written as JSON,
        goes with the ``Ack``; a value that does not validate fails the attempt
        (``ResultError``, retryable under the job's policy)."""
        scope = args[1].run_scope if len(args) > 1 else None
        if scope is not None:  # its completion carries the result: no handler transaction
            vars(args[1])["run_scope"] = RunScope(scope.cancel, refuse_transaction, scope.report)
        error, value = await run_returning(
            entry.call,
            args,
            is_async=entry.is_async,
            executor=executor,
            timeout=self._timeout,
        )
        if error is None:
            shown = type_name(entry.job_type.result_type())
            try:
                return Ack(result_json(adapter, value, envelope.job_type, shown))
            except ResultError as exc:
                error = exc
        return decide(envelope, error, entry.retry, top_priority)

    def failed(self, envelope: Envelope, queue: QueueConfig, error: BaseException) -> Outcome:
        """``error`` decided under the job's retry policy (one attempt for an unknown type)."""
        entry = self._handlers.get(envelope.job_type) or self._batches.get(envelope.job_type)
        policy = _ONE_ATTEMPT if entry is None else entry.retry
        return decide(envelope, error, policy, queue.top_priority, None, self.deferrals)

    def fields(self, envelope: Envelope) -> dict[str, Any]:
        """``job_id``, ``job_type``, ``queue`` and ``attempt``."""
        return {
            "job_id": envelope.job_id,
            "job_type": envelope.job_type,
            "queue": envelope.queue,
            "attempt": envelope.attempt,
        }

    def outcome_message(
        self, envelope: Envelope, outcome: Outcome
    ) -> tuple[str, tuple[object, ...]]:
        """ "job T ID (QUEUE, attempt N) succeeded", "… failed; retry in 0.085s: …", "…
        deferred for 30.000s: …", "… dead-lettered: …", "… cancelled while it ran; not
        retried", "… ended cancelled, superseded by job ID (which holds its unique key),
        instead of being run again: …", "… lost its lease while it ran …" (the full job id,
        for ``queuey jobs show``)."""
        subject = "job %s %s (%s, attempt %d) "
        who = (envelope.job_type, envelope.job_id, envelope.queue, envelope.attempt)
        match outcome:
            case Ack():
                return subject + "succeeded", who
            case RetryAfter(delay=delay, error=error):
                return subject + "failed; retry in %.3fs: %s", (*who, delay.total_seconds(), error)
            case DeferFor(delay=delay, reason=reason):
                return subject + "deferred for %.3fs: %s", (*who, delay.total_seconds(), reason)
            case DeadLetter(reason=reason):
                return subject + "dead-lettered: %s", (*who, reason)
            case Cancelled(superseded_by=str() as rival, replaced=replaced):
                return (
                    subject + "ended cancelled, superseded by job %s (which holds its unique "
                    "key), instead of being run again: %s",
                    (*who, rival, replaced),
                )
            case Cancelled():
                return subject + "cancelled while it ran; not retried", who
            case LeaseLost():
                return (
                    subject + "lost its lease while it ran (the job may run elsewhere); "
                    "stopped, nothing recorded",
                    who,
                )


def _decoded(job_type: type[Job[Any, Any]], payload: Any) -> Job[Any, Any] | DeadLetter:
    """The job ``payload`` builds, or the dead letter saying why it cannot be built."""
    try:
        return built_job(job_type, payload)
    except ValidationError as exc:
        return DeadLetter(f"decode error: {_decode_detail(exc)}")
    except Exception as exc:  # a workflow step's builder may raise anything
        return DeadLetter(clean_text(f"step builder error: {type(exc).__name__}: {exc}"))


def _decode_detail(error: ValidationError) -> str:
    return clean_text(f"{error.errors()[0]['msg']} ({error.error_count()} errors)")
