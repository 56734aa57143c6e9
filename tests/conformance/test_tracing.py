"""OpenTelemetry tracing on every backend: one trace from the enqueue through the retries to the
successful run (the trace context rides in the envelope's headers), a topic publish with two
subscribers, spans named and attributed per the messaging semantic conventions.

Each test gives its own ``TracerProvider`` (the SDK's in-memory exporter) to the producer and
the worker, so nothing global is set."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased
from opentelemetry.trace import SpanKind, StatusCode

from queuey import JobContext, Producer, Worker
from queuey.backends.base import Backend
from queuey.topics import App, MessageContext, QueuesConfig
from tests.conformance.test_conformance import finished, make_kit
from tests.helpers import run_until


@pytest.fixture
def spans() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def attr(span: ReadableSpan, key: str) -> Any:
    assert span.attributes is not None
    return span.attributes[key]


def of_kind(found: tuple[ReadableSpan, ...], kind: SpanKind) -> list[ReadableSpan]:
    return [span for span in found if span.kind is kind]


async def test_one_trace_from_enqueue_through_two_retries_to_success(
    backend: Backend, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend, tracing=provider)
    worker = Worker(kit.queues, backend, tracing=provider)

    @worker.handler(kit.Retried)
    async def handle(job: Any, ctx: JobContext) -> None:
        if ctx.attempt <= job.fail_until:
            raise ValueError(f"boom {ctx.attempt}")

    job_id = await producer.enqueue(kit.Retried(fail_until=2))
    await run_until(worker, lambda: finished(worker) == 1)

    found = exporter.get_finished_spans()
    (send,) = of_kind(found, SpanKind.PRODUCER)
    runs = sorted(of_kind(found, SpanKind.CONSUMER), key=lambda s: attr(s, "queuey.job.attempt"))
    queue = kit.Retried.job_queue().name
    system = backend.messaging_system  # type: ignore[attr-defined]
    assert send.name == f"send {queue}"
    assert send.attributes is not None
    assert send.attributes["messaging.system"] == system
    assert send.attributes["messaging.destination.name"] == queue
    assert send.attributes["messaging.message.id"] == job_id
    assert [span.name for span in runs] == [f"process {queue}"] * 3
    assert send.context is not None
    for span in runs:
        assert span.context is not None and span.parent is not None
        assert span.context.trace_id == send.context.trace_id
        assert span.parent.span_id == send.context.span_id
        assert span.attributes is not None
        assert span.attributes["messaging.system"] == system
        assert span.attributes["messaging.destination.name"] == queue
        assert span.attributes["messaging.message.id"] == job_id
    outcomes = [attr(span, "queuey.outcome") for span in runs]
    assert outcomes == ["retried", "retried", "succeeded"]
    assert [span.status.status_code for span in runs] == [
        StatusCode.ERROR,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]
    failed = [event for span in runs[:2] for event in span.events if event.name == "exception"]
    assert [e.attributes["exception.message"] for e in failed] == ["boom 1", "boom 2"]  # type: ignore[index]
    assert [e.attributes["exception.type"] for e in failed] == ["ValueError"] * 2  # type: ignore[index]


async def test_enqueue_many_is_one_span_parent_of_each_job(
    backend: Backend, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend, tracing=provider)
    worker = Worker(kit.queues, backend, queues=[kit.queues.plain], tracing=provider)  # type: ignore[attr-defined]

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        return None

    await producer.enqueue_many([kit.Plain(n=n) for n in range(3)])
    await run_until(worker, lambda: finished(worker) == 3)
    found = exporter.get_finished_spans()
    (send,) = of_kind(found, SpanKind.PRODUCER)
    runs = of_kind(found, SpanKind.CONSUMER)
    assert send.attributes is not None and send.context is not None
    assert send.attributes["messaging.batch.message_count"] == 3
    assert len(runs) == 3
    assert {span.parent.span_id for span in runs if span.parent} == {send.context.span_id}


async def test_jobs_of_separate_enqueues_are_each_under_their_own_send(
    backend: Backend, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend, tracing=provider)
    worker = Worker(kit.queues, backend, queues=[kit.queues.plain], tracing=provider)  # type: ignore[attr-defined]
    ran: dict[int, str] = {}

    @worker.handler(kit.Plain)
    async def handle(job: Any) -> None:  # no context taken: the span is made all the same
        ran[job.n] = format(trace.get_current_span().get_span_context().trace_id, "032x")

    for n in range(3):
        await producer.enqueue(kit.Plain(n=n))
    await run_until(worker, lambda: finished(worker) == 3)
    found = exporter.get_finished_spans()
    sends = {attr(span, "messaging.message.id"): span for span in of_kind(found, SpanKind.PRODUCER)}
    runs = of_kind(found, SpanKind.CONSUMER)
    assert len(sends) == 3 and len(runs) == 3
    for span in runs:
        send = sends[attr(span, "messaging.message.id")]
        assert span.parent is not None and send.context is not None
        assert span.parent.span_id == send.context.span_id
        assert attr(span, "queuey.outcome") == "succeeded"
    assert len(set(ran.values())) == 3


async def test_a_trace_not_sampled_records_nothing_and_reaches_the_handler(
    backend: Backend, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    _, exporter = spans
    sending = TracerProvider(sampler=ALWAYS_OFF)  # the producer's trace is not sampled
    provider = TracerProvider(sampler=ParentBased(ALWAYS_ON))  # a span with no parent would be
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend, tracing=sending)
    worker = Worker(kit.queues, backend, queues=[kit.queues.plain], tracing=provider)  # type: ignore[attr-defined]
    seen: list[trace.SpanContext] = []

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        with provider.get_tracer("app").start_as_current_span("inner") as inner:
            seen.append(inner.get_span_context())

    await producer.enqueue(kit.Plain(n=1))
    await run_until(worker, lambda: finished(worker) == 1)
    assert exporter.get_finished_spans() == ()
    (inner,) = seen
    assert inner.trace_id != 0 and not inner.trace_flags.sampled


async def test_topic_publish_with_two_subscribers_gives_two_runs_under_it(
    backend: Backend, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    if backend.messaging_system == "rabbitmq":  # type: ignore[attr-defined]
        pytest.skip("topics run on PostgreSQL and memory")
    topic = f"t{id(exporter)}.paid"
    app = App(QueuesConfig(subscribe={topic: ["charge", "receipt"]}))
    ran: list[str] = []

    @app.function
    async def charge(payload: Any, context: MessageContext) -> None:
        ran.append("charge")

    @app.function
    async def receipt(payload: Any, context: MessageContext) -> None:
        ran.append("receipt")

    subscriber = app.subscriber(backend)
    subscriber.instrument(tracing=provider)
    await app.publisher(backend, tracing=provider).publish(topic, {"order": 7})
    await run_until(subscriber, lambda: len(ran) == 2)
    found = exporter.get_finished_spans()
    (send,) = of_kind(found, SpanKind.PRODUCER)
    runs = of_kind(found, SpanKind.CONSUMER)
    assert send.name == f"send {topic}" and send.context is not None
    assert sorted(attr(span, "queuey.job.type") for span in runs) == ["charge", "receipt"]
    for span in runs:
        assert span.parent is not None and span.parent.span_id == send.context.span_id
        assert span.context is not None and span.context.trace_id == send.context.trace_id
