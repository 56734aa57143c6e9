"""A workflow is one trace, on PostgreSQL and in memory: ``enqueue_workflow`` is one PRODUCER
span ``send workflow`` and every run of every step (a retried one too) is its child, each
carrying ``queuey.workflow.id``; the workflow steps' outcomes are counted in
``queuey_workflow_steps_total{queue,outcome}`` (no label names a workflow). The jobs a step
fans out to are in the trace too."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from queuey import Job, Producer, Worker
from queuey.backends.base import Backend
from queuey.backends.workflow_ops import WorkflowOps
from queuey.observability import Metrics
from queuey.workflows import FanOut, chain, group
from tests.conformance.test_workflow_ops import split_and_sum
from tests.integration.postgres.workflow_app import Count, Double, FlowQueues, Sum, register


class Split(Job[FlowQueues, FanOut[int]], queue=FlowQueues.steps, name="flows.SplitTraced"):
    text: str


async def test_a_workflow_is_one_trace_and_its_steps_are_counted(backend: Backend) -> None:
    if not isinstance(backend, WorkflowOps):
        pytest.skip("the backend runs no workflows")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    producer = await Producer.create(FlowQueues, backend, tracing=provider)
    worker = Worker(FlowQueues, backend, tracing=provider, metrics=Metrics(registry))

    async def record(kind: str, key: str) -> None:
        return None

    register(worker, record)
    running = asyncio.create_task(worker.run())
    try:
        flow = chain(
            group(Count(text="ab"), Count(text="c")).then(Sum.from_counts), Double.from_count
        )
        handle = await producer.enqueue_workflow(flow)
        other = await producer.enqueue_workflow(chain(Count(text="xyz"), Double.from_count))
        assert await handle.result(timeout=30) == 6 and await other.result(timeout=30) == 6
    finally:
        worker.shutdown()
        await running
    found = exporter.get_finished_spans()
    sends = [s for s in found if s.kind is SpanKind.PRODUCER]
    assert [s.name for s in sends] == ["send workflow", "send workflow"]
    send = next(
        s for s in sends if (s.attributes or {})["queuey.workflow.id"] == handle.workflow_id
    )
    assert (send.attributes or {})["messaging.batch.message_count"] == 4
    runs = [s for s in found if s.kind is SpanKind.CONSUMER]
    mine = [s for s in runs if (s.attributes or {}).get("queuey.workflow.id") == handle.workflow_id]
    assert sorted(str((s.attributes or {})["messaging.message.id"]) for s in mine) == sorted(
        node.job_id for node in flow.nodes
    )
    assert len(runs) == 6 and all("queuey.workflow.id" in (s.attributes or {}) for s in runs)
    for span in mine:
        assert send.context is not None and span.context is not None and span.parent is not None
        assert span.context.trace_id == send.context.trace_id
        assert span.parent.span_id == send.context.span_id
    assert len({s.context.trace_id for s in runs if s.context is not None}) == 2  # one per workflow
    steps = registry.get_sample_value(
        "queuey_workflow_steps_total", {"queue": FlowQueues.steps.name, "outcome": "succeeded"}
    )
    assert steps == 6


async def test_jobs_a_step_fans_out_to_are_in_its_workflows_trace(backend: Backend) -> None:
    if not isinstance(backend, WorkflowOps):
        pytest.skip("the backend runs no workflows")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    producer = await Producer.create(FlowQueues, backend, tracing=provider)
    worker = Worker(FlowQueues, backend, tracing=provider)

    handle = await split_and_sum(producer, worker, Split)
    found = exporter.get_finished_spans()
    (send,) = [s for s in found if s.kind is SpanKind.PRODUCER]
    runs = [s for s in found if s.kind is SpanKind.CONSUMER]
    assert len(runs) == 4  # the split, the two jobs it added, the sum
    for span in runs:
        assert send.context is not None and span.context is not None
        assert span.context.trace_id == send.context.trace_id
        assert (span.attributes or {})["queuey.workflow.id"] == handle.workflow_id
