"""What the two queuey systems share: the benchmark's queue set and job, and a ``Bench`` over
any queuey backend (``Producer.enqueue`` / ``enqueue_many`` and one ``Worker`` with an async
no-op handler)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from bench.systems import Tally
from bench.systems._env import SUFFIX
from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey._runtime.heap import freeze_heap  # what the CLI does at start-up
from queuey.backends.base import Backend

__all__ = ["MAX_PRIORITY", "PREFETCH", "BenchQueues", "Noop", "QueueyBench"]

PREFETCH = int(os.environ.get("BENCH_QUEUEY_PREFETCH", "256"))
MAX_PRIORITY = int(os.environ.get("BENCH_QUEUEY_MAX_PRIORITY", "0"))
"""The bench queue's priority levels: 0, not a priority queue, like every peer's queue (on
RabbitMQ, queuey's default of 10 declares ``x-max-priority``, a priority queue, which costs the
broker more per message: docs/benchmarks.md, round 6). PostgreSQL's drain does not depend on it."""
OBSERVE = os.environ.get("BENCH_QUEUEY_OBSERVE", "")
"""The cost of observability: ``metrics`` (Prometheus ``Metrics``), ``tracing`` (an
OpenTelemetry SDK provider sampling every trace, batching spans to an exporter that drops
them), ``both``, ``sampled`` (both, 10% of traces sampled at enqueue), or ``unsampled`` (tracing
on, no trace sampled: what tracing costs a run whose trace is not kept); empty: neither."""


def observability() -> tuple[object, Any]:
    """``(tracing, metrics)`` for the producer and worker, as ``OBSERVE`` says."""
    metrics = None
    if OBSERVE in ("metrics", "both", "sampled"):
        from queuey.observability import Metrics

        metrics = Metrics()
    if OBSERVE not in ("tracing", "both", "sampled", "unsampled"):
        return False, metrics
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import (
        ALWAYS_OFF,
        ALWAYS_ON,
        ParentBased,
        TraceIdRatioBased,
    )

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    sampler = ParentBased(TraceIdRatioBased(0.1)) if OBSERVE == "sampled" else ALWAYS_ON
    if OBSERVE == "unsampled":
        sampler = ParentBased(ALWAYS_OFF)
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    return provider, metrics


class BenchQueues(QueueSet, prefix=f"bench{SUFFIX}"):
    noop = Queue(prefetch=PREFETCH, max_priority=MAX_PRIORITY)


class Noop(Job[BenchQueues], queue=BenchQueues.noop, name="bench.Noop"):
    t: float


class QueueyBench:
    """The ``Bench`` of queuey on the backend ``open_backend()`` opens.

    ``setup``/``teardown`` come from the backend-specific subclass.
    """

    settings: dict[str, Any]

    def open_backend(self) -> AbstractAsyncContextManager[Backend]:
        """An opened backend, closed on exit."""
        raise NotImplementedError

    async def purge(self, backend: Backend) -> None:
        """Empty the benchmark's queue."""
        raise NotImplementedError

    async def clear(self) -> None:
        async with self.open_backend() as backend:
            await self.purge(backend)

    async def enqueue(self, payloads: int, bulk: bool, interval_s: float) -> float:
        async with self.open_backend() as backend:
            producer = await Producer.create(BenchQueues, backend, tracing=observability()[0])
            started = time.perf_counter()
            if bulk:
                await producer.enqueue_many([Noop(t=time.time()) for _ in range(payloads)])
                return time.perf_counter() - started
            loop = asyncio.get_running_loop()
            start = loop.time()
            for i in range(payloads):
                if interval_s:
                    await asyncio.sleep(max(0.0, start + i * interval_s - loop.time()))
                await producer.enqueue(Noop(t=time.time()))
            return time.perf_counter() - started

    async def enqueue_timed(
        self, payloads: int, interval_s: float, ready: Callable[[], None]
    ) -> list[tuple[float, float]]:
        async with self.open_backend() as backend:
            producer = await Producer.create(BenchQueues, backend, tracing=observability()[0])
            await producer.enqueue(Noop(t=time.time()))  # warm-up: the kept connection
            ready()
            calls: list[tuple[float, float]] = []
            loop = asyncio.get_running_loop()
            start = loop.time()
            for i in range(payloads):
                await asyncio.sleep(max(0.0, start + i * interval_s - loop.time()))
                began = time.monotonic()
                await producer.enqueue(Noop(t=time.time()))
                calls.append((began, (time.monotonic() - began) * 1000.0))
            return calls

    async def work(self, tally: Tally, ready: Callable[[], None]) -> None:
        async with self.open_backend() as backend:
            tracing, metrics = observability()
            worker = Worker(BenchQueues, backend, tracing=tracing, metrics=metrics)

            @worker.handler(Noop)
            async def noop(job: Noop, ctx: JobContext) -> None:
                tally.hit(job.t)

            freeze_heap()  # as `queuey worker` does once everything is imported
            ready()
            running = asyncio.create_task(worker.run())
            await tally.done.wait()
            worker.shutdown()
            await running
            if worker.settle_failures:
                raise RuntimeError(f"{worker.settle_failures} settle(s) failed")
