"""OpenTelemetry tracing (the ``otel`` extra: ``opentelemetry-api`` only; the SDK, its
exporters and sampling are the application's choice).

Imported only when tracing is asked for (``Worker(..., tracing=True)``, ``Producer(...,
tracing=True)``, ``queuey worker --tracing``), so without it nothing of OpenTelemetry is
imported and no run pays for it: the ``Tracing`` middleware is simply not in the chain.

Spans follow the OpenTelemetry messaging semantic conventions:

- ``SendTracing.sending``: one PRODUCER span ``send <queue>`` per enqueue or publish call.
  ``enqueue_many`` and a topic publish are one call and one span (``messaging.batch.
  message_count``): they are one all-or-none write (one statement on PostgreSQL), so one span
  measures what happened, and a batch of thousands does not cost thousands of spans. Every
  envelope of the call carries that span's W3C trace context in its ``headers``
  (``traceparent``, ``tracestate``), so each job's runs are its children.
- ``Tracing``: one CONSUMER span ``process <queue>`` per run of a handler, whose parent is the
  context extracted from the envelope. A retry, a deferral, a RabbitMQ hold queue, a lease
  reclaim and a topic fan-out all hand on the same ``headers``, so every run of a job stays in
  its producer's trace. The span carries ``queuey.job.attempt`` and ``queuey.outcome``; a
  failed run records its exception (or its error text) and an ERROR status.
- Workflows: ``enqueue_workflow`` is one PRODUCER span ``send workflow``
  (``queuey.workflow.id``, ``messaging.batch.message_count``: its steps) whose trace context
  every step stores with its row, so every run of every step of a workflow is in that one
  trace, its span carrying ``queuey.workflow.id`` (from the step's ``queuey-workflow``
  header, set with tracing off too).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from queuey._extras import install_hint
from queuey._outcome import DeadLetter, Outcome, OutcomeKind, RetryAfter
from queuey._runtime.middleware import CallNext, Unguarded
from queuey.backends.base import Delivery
from queuey.backends.steps import WORKFLOW_HEADER
from queuey.envelope import Envelope
from queuey.errors import ConfigError

try:
    from opentelemetry import context, propagate, trace
    from opentelemetry.context import Context
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ConfigError(f"tracing needs OpenTelemetry: {install_hint('otel')} ({exc})") from exc

__all__ = ["SendTracing", "Tracing", "system_of"]

_SCOPE = "queuey"


def system_of(backend: object) -> str:
    """The ``messaging.system`` of ``backend`` (its ``messaging_system``, else ``"queuey"``)."""
    system = getattr(backend, "messaging_system", None)
    return system if isinstance(system, str) else "queuey"


def tracer_of(provider: object) -> trace.Tracer:
    """queuey's tracer from ``provider`` (a ``TracerProvider``), or from the global one when
    ``provider`` is ``True`` or ``None``.

    Raises:
        ConfigError: ``provider`` is neither.
    """
    if provider is None or provider is True:
        return trace.get_tracer(_SCOPE)
    get_tracer = getattr(provider, "get_tracer", None)
    if not callable(get_tracer):
        raise ConfigError(f"tracing: {provider!r} is not True nor an OpenTelemetry TracerProvider")
    tracer: trace.Tracer = get_tracer(_SCOPE)
    return tracer


class _Spans:
    """What both sides share: queuey's tracer, the ``messaging.system``, and span names
    ``"<operation> <queue>"`` built once per queue."""

    def __init__(self, system: str, provider: object, operation: str) -> None:
        self._tracer = tracer_of(provider)
        self._system = system
        self._operation = operation
        self._names: dict[str, str] = {}

    def _name(self, queue: str) -> str:
        name = self._names.get(queue)
        if name is None:
            name = self._names[queue] = f"{self._operation} {queue}"
        return name


class SendTracing(_Spans):
    """The PRODUCER side: spans around publishing, trace context into the envelopes.

    Args:
        system: the ``messaging.system`` (``system_of(backend)``).
        provider: a ``TracerProvider``, or ``True`` for the global one.
    """

    def __init__(self, system: str, provider: object = True) -> None:
        super().__init__(system, provider, "send")

    @contextlib.contextmanager
    def sending(self, envelopes: Sequence[Envelope]) -> Iterator[None]:
        """A span around publishing ``envelopes`` (at least one), whose context is written
        into each envelope's ``headers`` on entry. An exception leaving the block is recorded
        on the span (ERROR) and goes on."""
        first = envelopes[0]
        queues = {envelope.queue for envelope in envelopes}
        queue = first.queue if len(queues) == 1 else ""
        attributes: dict[str, Any] = {
            "messaging.system": self._system,
            "messaging.operation.type": "send",
            "messaging.destination.name": queue or ",".join(sorted(queues)),
        }
        if len(envelopes) == 1:
            attributes["messaging.message.id"] = first.job_id
            attributes["queuey.job.type"] = first.job_type
        else:
            attributes["messaging.batch.message_count"] = len(envelopes)
        name = self._name(queue) if queue else self._operation
        with self._tracer.start_as_current_span(
            name, kind=SpanKind.PRODUCER, attributes=attributes
        ):
            for envelope in envelopes:
                propagate.inject(envelope.headers)
            yield

    @contextlib.contextmanager
    def sending_workflow(
        self, workflow_id: str, steps: int, headers: dict[str, str]
    ) -> Iterator[None]:
        """A span ``send workflow`` around storing workflow ``workflow_id`` (``steps`` steps,
        ``queuey.workflow.id``), whose context is written into ``headers`` on entry: every
        step carries them, so each step's runs are children of this span (one trace per
        workflow). An exception leaving the block is recorded on the span and goes on."""
        attributes: dict[str, Any] = {
            "messaging.system": self._system,
            "messaging.operation.type": "send",
            "messaging.batch.message_count": steps,
            "queuey.workflow.id": workflow_id,
        }
        with self._tracer.start_as_current_span(
            "send workflow", kind=SpanKind.PRODUCER, attributes=attributes
        ):
            propagate.inject(headers)
            yield


class Tracing(_Spans, Unguarded):
    """The CONSUMER side: a span around each run, child of the producer's.

    Args:
        system: the ``messaging.system`` (``system_of(backend)``).
        provider: a ``TracerProvider``, or ``True`` for the global one.
    """

    def __init__(self, system: str, provider: object = True) -> None:
        super().__init__(system, provider, "process")
        self._per_queue: dict[str, dict[str, Any]] = {}
        self._textmap: object = None
        self._fields: tuple[str, ...] = ()
        self._last_key: list[str | None] | None = None
        self._last_parent: Context | None = None

    def _queue_attributes(self, queue: str) -> dict[str, Any]:
        """What every span of ``queue`` carries from its start (what a sampler sees), built
        once per queue: the SDK copies what it is given, so the dict is never changed."""
        attributes = self._per_queue.get(queue)
        if attributes is None:
            attributes = self._per_queue[queue] = {
                "messaging.system": self._system,
                "messaging.operation.type": "process",
                "messaging.destination.name": queue,
            }
        return attributes

    def _job_attributes(self, envelope: Envelope) -> dict[str, Any]:
        """The run's own attributes, set only on a span that records."""
        attributes = {
            "messaging.message.id": envelope.job_id,
            "queuey.job.type": envelope.job_type,
            "queuey.job.attempt": envelope.attempt,
        }
        workflow = envelope.headers.get(WORKFLOW_HEADER)
        if workflow is not None:
            attributes["queuey.workflow.id"] = workflow
        return attributes

    def _parent(self, headers: dict[str, str]) -> Context | None:
        """The producer's context extracted from ``headers``; the last one is kept, since the
        jobs of one ``enqueue_many`` carry the same trace context and come in a row."""
        if not headers:
            return None
        textmap = propagate.get_global_textmap()
        if textmap is not self._textmap:  # its fields are a set built at each read
            self._textmap, self._fields, self._last_key = textmap, tuple(textmap.fields), None
        key = [headers.get(field) for field in self._fields]
        if key != self._last_key:
            self._last_parent = propagate.extract(headers)
            self._last_key = key
        return self._last_parent

    async def around_call(self, delivery: Delivery, call_next: CallNext) -> Outcome:
        """Run the delivery inside its CONSUMER span, the current span while it runs (a
        span the sampler dropped too, so the handler's own spans follow its decision);
        record the run's attributes and outcome there only when the span records."""
        envelope = delivery.envelope
        queue = envelope.queue
        parent = self._parent(envelope.headers)
        span = self._tracer.start_span(
            self._name(queue),
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=self._queue_attributes(queue),
            record_exception=False,
            set_status_on_exception=False,
        )
        token = context.attach(trace.set_span_in_context(span, parent))
        try:
            outcome = await call_next(delivery)
        except BaseException:
            if span.is_recording():
                span.set_attributes(self._job_attributes(envelope))
            raise
        else:
            if span.is_recording():
                attributes = self._job_attributes(envelope)
                attributes["queuey.outcome"] = outcome.kind.value
                span.set_attributes(attributes)
                _record(span, outcome)
            return outcome
        finally:
            context.detach(token)
            span.end()


def _record(span: trace.Span, outcome: Outcome) -> None:
    """Put a failed ``outcome`` on ``span``: its exception and status (its kind is set with
    the run's attributes)."""
    if outcome.kind is OutcomeKind.SUCCEEDED or outcome.kind is OutcomeKind.DEFERRED:
        return
    if outcome.kind is OutcomeKind.CANCELLED:
        return
    if outcome.kind is OutcomeKind.LEASE_LOST:
        span.add_event("lease lost", {"exception.message": outcome.text})
        span.set_status(Status(StatusCode.ERROR, "the lease was lost while the job ran"))
        return
    exception = outcome.exception if isinstance(outcome, RetryAfter | DeadLetter) else None
    if exception is not None:
        span.record_exception(exception)
    else:
        span.add_event("exception", {"exception.message": outcome.text})
    span.set_status(Status(StatusCode.ERROR, outcome.text))
