"""A run whose lease was lost (the heartbeat finds its row held by another worker: it expired
while this process stalled and was taken over) ends with its own outcome, ``lease_lost``: not
a cancellation, in the stats, the ``on_settled`` callback, the metrics, the log and the trace."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from psycopg import sql

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.envelope import Envelope
from queuey.observability import Metrics
from tests.integration.postgres.dashboard_helpers import execute

pytestmark = pytest.mark.postgres


class LostQueues(QueueSet, prefix="leaselost"):
    work = Queue()


class Long(Job[LostQueues], queue=LostQueues.work, name="leaselost.Long"):
    n: int


async def take_over(url: str, schema: str, job_id: str) -> None:
    """As another worker would after this one's lease expired: the row is now its."""
    table = sql.Identifier(schema, "queue_message")
    statement = sql.SQL("UPDATE {} SET claimed_by = 'elsewhere:1:0' WHERE id = %s").format(table)
    await execute(url, statement, [job_id])


async def test_a_run_whose_row_was_taken_over_ends_lease_lost_not_cancelled(
    database_url: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    metrics = Metrics()
    settled: list[tuple[str, str]] = []

    def on_settled(envelope: Envelope, outcome: str, text: str) -> None:
        settled.append((outcome, text))

    backend = PostgresBackend(database_url, schema=pg_schema, lease="1500ms")
    async with backend:
        producer = await Producer.create(LostQueues, backend)
        worker = Worker(
            LostQueues,
            backend,
            cancel_grace="200ms",
            on_settled=on_settled,
            tracing=provider,
            metrics=metrics,
        )
        started = asyncio.Event()

        @worker.handler(Long)
        async def handle(job: Long, ctx: JobContext) -> None:
            started.set()
            await asyncio.sleep(30)

        job_id = await producer.enqueue(Long(n=1))
        with caplog.at_level(logging.INFO):
            running = asyncio.create_task(worker.run())
            try:
                await asyncio.wait_for(started.wait(), 10)
                await take_over(database_url, pg_schema, job_id)
                stats: Any = worker.stats[LostQueues.work.name]
                async with asyncio.timeout(10):  # a heartbeat every 0.5 s
                    while stats.lease_lost == 0:
                        await asyncio.sleep(0.02)
            finally:
                worker.shutdown()
                await asyncio.wait_for(running, 10)
    assert (stats.succeeded, stats.retried, stats.dead, stats.cancelled) == (0, 0, 0, 0)
    assert stats.lease_lost == 1
    assert settled == [("lease_lost", "lease lost")]
    assert worker.settle_failures == 0
    value = metrics.registry.get_sample_value(
        "queuey_jobs_total", {"queue": LostQueues.work.name, "outcome": "lease_lost"}
    )
    assert value == 1
    cancelled = metrics.registry.get_sample_value(
        "queuey_jobs_total", {"queue": LostQueues.work.name, "outcome": "cancelled"}
    )
    assert not cancelled
    messages = [r.getMessage() for r in caplog.records]
    assert any("lost its lease while it ran" in m for m in messages), messages
    assert not any("cancelled while it ran" in m for m in messages), messages
    (run,) = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CONSUMER]
    assert run.attributes is not None and run.attributes["queuey.outcome"] == "lease_lost"
    assert run.status.status_code is StatusCode.ERROR
