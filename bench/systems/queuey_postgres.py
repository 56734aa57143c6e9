"""queuey on PostgreSQL: ``Producer.enqueue`` / ``enqueue_many`` and one ``Worker`` with an async
no-op handler, in its own schema (``bench_queuey``) and NOTIFY channel."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

from bench.systems import Tally
from bench.systems._env import DATABASE_URL, drop_schema
from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend, migrate

__all__ = ["make"]

SCHEMA = "bench_queuey"
CHANNEL = "bench_queuey"
PREFETCH = int(os.environ.get("BENCH_QUEUEY_PREFETCH", "256"))


class BenchQueues(QueueSet, prefix="bench"):
    noop = Queue(prefetch=PREFETCH)


class Noop(Job[BenchQueues], queue=BenchQueues.noop, name="bench.Noop"):
    t: float


class QueueyPostgres:
    """The ``Bench`` of queuey on PostgreSQL, with the library's defaults."""

    def __init__(self) -> None:
        config = BenchQueues.noop.config
        self.settings: dict[str, Any] = {
            "driver": "psycopg 3 (pool)",
            "prefetch": config.prefetch,
            "concurrency": "default (= prefetch)",
            "notify": True,
            "handler": "async def, no-op",
        }

    def _backend(self) -> PostgresBackend:
        return PostgresBackend(DATABASE_URL, schema=SCHEMA, channel=CHANNEL, retain=None)

    async def setup(self) -> None:
        await drop_schema(SCHEMA)
        await migrate(DATABASE_URL, schema=SCHEMA)

    async def teardown(self) -> None:
        await drop_schema(SCHEMA)

    async def clear(self) -> None:
        async with self._backend() as backend:
            await backend.purge([BenchQueues.noop.name])

    async def enqueue(self, payloads: int, bulk: bool, interval_s: float) -> None:
        async with self._backend() as backend:
            producer = await Producer.create(BenchQueues, backend)
            if bulk:
                await producer.enqueue_many([Noop(t=time.time()) for _ in range(payloads)])
                return
            loop = asyncio.get_running_loop()
            start = loop.time()
            for i in range(payloads):
                if interval_s:
                    await asyncio.sleep(max(0.0, start + i * interval_s - loop.time()))
                await producer.enqueue(Noop(t=time.time()))

    async def work(self, tally: Tally, ready: Callable[[], None]) -> None:
        async with self._backend() as backend:
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


def make() -> QueueyPostgres:
    """The system's ``Bench``."""
    return QueueyPostgres()
