"""queuey on PostgreSQL with a batch handler (``Worker.batch_handler``, ``size`` 100, ``wait``
50 ms) instead of a handler per job, in its own schema (``bench_queuey_batch``); every other
setting as ``queuey-postgres``. Only the drains differ: enqueue and latency go the same way."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bench.systems import Tally
from bench.systems._env import SUFFIX
from bench.systems._queuey import PREFETCH, BenchQueues, Noop, observability
from bench.systems.queuey_postgres import QueueyPostgres
from queuey import BatchContext, Worker
from queuey._runtime.heap import freeze_heap  # what the CLI does at start-up

__all__ = ["BATCH_SIZE", "make"]

BATCH_SIZE = 100


class QueueyPostgresBatch(QueueyPostgres):
    """The ``Bench`` of queuey on PostgreSQL with a batch handler."""

    def __init__(self) -> None:
        super().__init__(f"bench_queuey_batch{SUFFIX}")
        self.settings["handler"] = f"async batch handler, no-op (size {BATCH_SIZE}, wait 50 ms)"

    async def work(self, tally: Tally, ready: Callable[[], None]) -> None:
        async with self.open_backend() as backend:
            tracing, metrics = observability()
            worker = Worker(
                BenchQueues, backend, concurrency=PREFETCH, tracing=tracing, metrics=metrics
            )

            @worker.batch_handler(Noop, size=BATCH_SIZE, wait="50ms")
            async def noop(jobs: list[Noop], ctx: BatchContext) -> None:
                for job in jobs:
                    tally.hit(job.t)

            freeze_heap()
            ready()
            running = asyncio.create_task(worker.run())
            await tally.done.wait()
            worker.shutdown()
            await running
            if worker.settle_failures:
                raise RuntimeError(f"{worker.settle_failures} settle(s) failed")


def make() -> QueueyPostgresBatch:
    """The system's ``Bench``."""
    return QueueyPostgresBatch()
