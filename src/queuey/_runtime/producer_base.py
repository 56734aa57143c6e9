"""What the async ``Producer`` and its sync twin (``queuey.sync.Producer``) share: turning jobs
into envelopes, checking that a job belongs to the producer's queue set, that a priority is in
its queue's range and that each payload is JSON every backend stores alike (``_payload``: a
``PayloadError`` naming the job type and the field), and reading delays, bounded by what the
backend can hold (``Backend.max_delay``, at most ``MAX_DURATION``). No I/O: each producer only
adds how it publishes.

Both producers subclass ``ProducerBase`` and publish exactly what it builds, so the two cannot
disagree about what an enqueue writes (``tests/unit/test_sync_parity.py`` checks that their
public methods and parameters stay the same).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any, Generic

from queuey._job_batch import job_batch
from queuey._payload import job_payload
from queuey.backends.steps import StepEdge, StepRow
from queuey.durations import MAX_DURATION, Duration, parse_delay
from queuey.envelope import Envelope, new_job_ids
from queuey.errors import ConfigError, NotSupportedError
from queuey.jobs import Job, Q
from queuey.queues import QueueConfig
from queuey.workflows import Workflow, step_rows

__all__ = [
    "ProducerBase",
    "Sending",
    "check_priority",
    "delay_of",
    "sending_for",
    "workflow_sending",
]

Sending = Callable[[Sequence[Envelope]], AbstractContextManager[None]]
"""Wraps publishing envelopes: a PRODUCER span whose trace context goes into their headers
(``_runtime.tracing.SendTracing.sending``), or nothing."""

_NOTHING = contextlib.nullcontext()


def untraced(envelopes: Sequence[Envelope]) -> AbstractContextManager[None]:
    """No span: a shared no-op context (no allocation per enqueue)."""
    return _NOTHING


def sending_for(backend: object, tracing: object) -> Sending:
    """How a producer on ``backend`` wraps its publishing: ``untraced`` unless ``tracing`` is
    ``True`` (the global tracer provider) or a ``TracerProvider``; OpenTelemetry is imported
    only then.

    Raises:
        ConfigError: tracing asked for without the ``otel`` extra, or a ``tracing`` that is
            not a tracer provider.
    """
    if tracing is False or tracing is None:
        return untraced
    from queuey._runtime.tracing import SendTracing, system_of

    return SendTracing(system_of(backend), tracing).sending


def workflow_sending(
    sending: Sending, workflow_id: str, steps: int, headers: dict[str, str]
) -> AbstractContextManager[None]:
    """Wraps storing a workflow of ``steps`` steps: with tracing, one PRODUCER span ``send
    workflow`` whose trace context goes into ``headers`` (every step's), so each step's run
    is in the workflow's one trace (``SendTracing.sending_workflow``); else nothing."""
    tracer = getattr(sending, "__self__", None)  # the SendTracing of a traced producer
    if tracer is None:
        return _NOTHING
    started: AbstractContextManager[None] = tracer.sending_workflow(workflow_id, steps, headers)
    return started


def check_priority(priority: object, queue: QueueConfig) -> int:
    """``priority`` if it is an integer in ``0..queue.max_priority`` (a topic's range is named
    as the topic's).

    Raises:
        TypeError: ``priority`` is not an ``int`` (a ``bool`` is not one).
        ValueError: out of range; the message names the queue and the range.
    """
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"priority must be an int, got {type(priority).__name__}")
    if not 0 <= priority <= queue.max_priority:
        noun = "topic" if queue.kind == "topic" else "queue"
        raise ValueError(
            f"priority {priority} is out of range for {noun} {queue.name!r}: "
            f"0..{queue.max_priority}"
        )
    return priority


class ProducerBase(Generic[Q]):
    """The envelope building of a producer of ``queue_set`` (I/O free)."""

    queue_set: type[Q]
    sending: Sending = staticmethod(untraced)
    """Wraps each publish (set by ``tracing=``)."""
    keeps_results = True
    """Whether the backend stores results (a job declaring a result type is refused if not)."""

    def _step_target(self, job_type: type[Any]) -> tuple[str, str]:
        """``(job name, queue name)`` of a job class of this producer's set (as ``_target``)."""
        name, queue = self._target(job_type)
        return name, queue.name

    def _workflow_rows(
        self, flow: Workflow[Any], headers: dict[str, str]
    ) -> tuple[list[StepRow], list[StepEdge]]:
        """``flow``'s steps (each carrying ``headers``) and edges, as a backend stores them.

        Raises:
            TypeError, ConfigError, PayloadError: as ``queuey.workflows.step_rows``.
        """
        target = self._target
        return step_rows(
            flow,
            lambda cls: (target(cls)[0], target(cls)[1].name),
            job_payload,
            time.time_ns() // 1_000_000,
            headers,
        )

    def _target(self, job_type: type[Any]) -> tuple[str, QueueConfig]:
        """``(job name, queue config)`` of a job class of this producer's set.

        Raises:
            TypeError: ``job_type`` is not a job of this producer's queue set.
            NotSupportedError: ``job_type`` declares a result type and the backend keeps no
                results.
        """
        if not (isinstance(job_type, type) and issubclass(job_type, Job)) or (
            job_type.job_queue().queue_set is not self.queue_set
        ):
            owner = getattr(getattr(job_type, "__queuey_queue__", None), "queue_set", None)
            raise TypeError(
                f"{job_type.__qualname__} belongs to "
                f"{getattr(owner, '__name__', 'no queue set')}, not {self.queue_set.__name__}"
            )
        if job_type.__queuey_result__ is not None and not self.keeps_results:
            backend = type(getattr(self, "backend", None)).__name__
            raise NotSupportedError(
                f"{job_type.__qualname__} declares a result type, and {backend} cannot store "
                "or await results (RabbitMQ keeps no per-job state): use PostgresBackend or "
                "MemoryBackend (sync: ThreadedBackend over one), or declare the job without a "
                "result type"
            )
        return job_type.job_name(), job_type.job_queue().config

    def _envelope(self, job: Job[Q, Any], priority: int = 0) -> Envelope:
        """The first-attempt envelope of ``job`` at ``priority``.

        Raises:
            TypeError: ``job`` belongs to another queue set, or ``priority`` is not an int.
            ValueError: ``priority`` is outside its queue's ``0..max_priority``.
            PayloadError: a field is not JSON every backend stores alike.
        """
        name, queue = self._target(type(job))
        priority = check_priority(priority, queue)
        return Envelope.new(name, queue.name, job_payload(job, name), priority=priority)

    def _deferred(self, job: Job[Q, Any]) -> Envelope:
        """The envelope of ``defer``: at its queue's top priority.

        Raises:
            TypeError: ``job`` belongs to another queue set.
        """
        name, queue = self._target(type(job))
        payload = job_payload(job, name)
        return Envelope.new(name, queue.name, payload, priority=queue.top_priority)

    def _envelopes(self, jobs: Sequence[Job[Q, Any]], priority: int = 0) -> Sequence[Envelope]:
        """One envelope per job at ``priority``, each job class checked and resolved once per
        call: a ``JobBatch`` (one dump for all, no envelope per job) when the jobs are of one
        class, untraced, and the backend takes batches (``takes_job_batches``).

        Raises:
            TypeError: a job belongs to another queue set (no envelope is returned).
            ValueError: ``priority`` is outside a job's queue's range.
        """
        targets: dict[type[Any], tuple[str, str]] = {}
        envelopes: list[Envelope] = []
        ids = new_job_ids(len(jobs))
        now_ms = time.time_ns() // 1_000_000
        if len(jobs) > 1 and self._batches():
            name, queue = self._target(type(jobs[0]))
            check_priority(priority, queue)
            batch = job_batch(jobs, ids, name, queue.name, priority, now_ms)
            if batch is not None:
                return batch
        trusted = Envelope.trusted
        for job, job_id in zip(jobs, ids, strict=True):
            job_type = type(job)
            target = targets.get(job_type)
            if target is None:
                name, queue = self._target(job_type)
                target = targets[job_type] = (name, queue.name)
                check_priority(priority, queue)
            payload = job_payload(job, target[0])
            # every value is checked above or made here: no pydantic validation per job
            envelopes.append(
                trusted(job_id, target[0], target[1], 1, now_ms, 0, priority, payload, {}, "job")
            )
        return envelopes

    def _batches(self) -> bool:
        """Whether ``enqueue_many`` may hand the backend a ``JobBatch``: it takes them and no
        span writes a trace context into each envelope."""
        backend = getattr(self, "backend", None)
        return self.sending is untraced and getattr(backend, "takes_job_batches", False) is True

    def _delay(self, value: Duration | None, what: str) -> timedelta:
        """``value`` (``None`` = now) as a delay this producer's backend can hold.

        Raises:
            ConfigError: naming ``what``: not a delay, negative, or longer than the backend's
                ``max_delay``.
        """
        delay = delay_of(value, what)
        backend = getattr(self, "backend", None)  # each producer's own, typed there
        limit: timedelta = getattr(backend, "max_delay", MAX_DURATION)  # an older backend
        if delay > limit:
            raise ConfigError(
                f"{what}: {value!r} is longer than {type(backend).__name__} can hold a "
                f"message ({limit / timedelta(days=1):.3g} days)"
            )
        return delay


def delay_of(delay: Duration | None, what: str) -> timedelta:
    """``delay`` parsed (``None`` = now).

    Raises:
        ConfigError: the delay does not parse or is negative.
    """
    return timedelta(0) if delay is None else parse_delay(delay, what)
