"""Observability without a server: the JSON log formatter (fields, trace ids, redaction), the
health endpoints of a worker on the memory backend across its life, and the depth gauges."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys

import httpx
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client.parser import text_string_to_metric_families

from queuey import Job, JobContext, MemoryBackend, Producer, Queue, QueueSet, Worker
from queuey.backends.base import QueueDepth
from queuey.observability import HealthServer, JsonFormatter, Metrics
from queuey.secrets import remember


class HealthQueues(QueueSet, prefix="health"):
    work = Queue(prefetch=2)


class Ping(Job[HealthQueues], queue=HealthQueues.work, name="health.Ping"):
    pass


def record(message: str, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("queuey.worker", logging.INFO, __file__, 1, message, None, None)
    made.__dict__.update(extra)
    return made


def test_json_lines_carry_the_fields_and_no_password() -> None:
    remember("postgresql://app:s3cret-pw@db/app")
    line = JsonFormatter().format(
        record("connecting to postgresql://app:s3cret-pw@db/app", job_id="j1", attempt=2)
    )
    entry = json.loads(line)
    assert "\n" not in line
    assert entry["message"] == "connecting to postgresql://app:***@db/app"
    assert (entry["level"], entry["logger"], entry["job_id"], entry["attempt"]) == (
        "INFO",
        "queuey.worker",
        "j1",
        2,
    )
    assert "s3cret" not in line


def test_json_lines_carry_the_active_span_ids() -> None:
    assert "opentelemetry.trace" in sys.modules
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("run") as span:
        entry = json.loads(JsonFormatter().format(record("inside")))
    context = span.get_span_context()
    assert entry["trace_id"] == f"{context.trace_id:032x}"
    assert entry["span_id"] == f"{context.span_id:016x}"
    assert "trace_id" not in json.loads(JsonFormatter().format(record("outside")))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_ready_only_while_the_worker_runs_and_metrics_are_served() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(HealthQueues, backend)
    worker = Worker(HealthQueues, backend, metrics=Metrics(depth_interval=0.05))

    @worker.handler(Ping)
    async def ping(job: Ping, ctx: JobContext) -> None:
        return None

    async with HealthServer(worker, host="127.0.0.1", port=0) as server:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
            assert (await client.get("/live")).status_code == 200
            assert (await client.get("/ready")).status_code == 503  # not running yet
            task = asyncio.create_task(worker.run())
            await producer.enqueue(Ping())
            async with asyncio.timeout(5):
                while worker.stats["health.work"].succeeded < 1 or not worker.ready:
                    await asyncio.sleep(0.01)
            assert (await client.get("/ready")).status_code == 200
            text = (await client.get("/metrics")).text
            worker.shutdown()
            assert (await client.get("/ready")).status_code == 503  # shutting down
            await task
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert values[("queuey_jobs_total", (("outcome", "succeeded"), ("queue", "health.work")))] == 1


async def test_a_closed_memory_backend_is_not_ready() -> None:
    backend = MemoryBackend()
    worker = Worker(HealthQueues, backend)
    task = asyncio.create_task(worker.run())
    async with asyncio.timeout(5):
        while not worker.ready:
            await asyncio.sleep(0.01)
    await backend.close()
    assert not worker.ready
    worker.shutdown()
    await task


def test_a_queue_that_emptied_reads_zero() -> None:
    metrics = Metrics()
    metrics.record_depths([QueueDepth("job", "q", 3, 1, 2, 0, 4.5)])
    metrics.record_depths([])
    registry = metrics.registry
    assert registry.get_sample_value("queuey_queue_depth", {"queue": "q", "state": "pending"}) == 0
    assert registry.get_sample_value("queuey_queue_oldest_pending_age_seconds", {"queue": "q"}) == 0
