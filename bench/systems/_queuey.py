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
from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.base import Backend

__all__ = ["PREFETCH", "BenchQueues", "Noop", "QueueyBench"]

PREFETCH = int(os.environ.get("BENCH_QUEUEY_PREFETCH", "256"))


class BenchQueues(QueueSet, prefix="bench"):
    noop = Queue(prefetch=PREFETCH)


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
            producer = await Producer.create(BenchQueues, backend)
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

    async def work(self, tally: Tally, ready: Callable[[], None]) -> None:
        async with self.open_backend() as backend:
            worker = Worker(BenchQueues, backend)

            @worker.handler(Noop)
            async def noop(job: Noop, ctx: JobContext) -> None:
                tally.hit(job.t)

            ready()
            running = asyncio.create_task(worker.run())
            await tally.done.wait()
            worker.shutdown()
            await running
            if worker.settle_failures:
                raise RuntimeError(f"{worker.settle_failures} settle(s) failed")
