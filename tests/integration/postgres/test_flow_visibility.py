"""What flow limits hold back is visible: the claims count it (``throttled``, no extra query)
and the metrics carry it as ``queuey_jobs_throttled_total`` and ``queuey_jobs_held_back``, on
PostgreSQL and memory alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.memory import MemoryBackend
from queuey.backends.postgres import PostgresBackend
from queuey.limits import Concurrency, ThrottleBackend
from queuey.observability import Metrics

pytestmark = pytest.mark.postgres


class SeenQueues(QueueSet, prefix="seen"):
    one = Queue(prefetch=8, limits=[Concurrency(1)])
    free = Queue(prefetch=8)


class One(Job[SeenQueues], queue=SeenQueues.one, name="seen.One"):
    n: int


class Free(Job[SeenQueues], queue=SeenQueues.free, name="seen.Free"):
    n: int


@pytest.fixture
async def pg(database_url: str, pg_schema: str) -> AsyncIterator[PostgresBackend]:
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="5s") as backend:
        yield backend


async def test_a_capped_queue_counts_its_throttled_claims_on_postgres(
    pg: PostgresBackend,
) -> None:
    await throttled_claims_are_counted(pg)


def sample(metrics: Metrics, name: str, queue: str, limit: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"queue": f"seen.{queue}", "limit": limit})


async def throttled_claims_are_counted(backend: PostgresBackend | MemoryBackend) -> None:
    assert isinstance(backend, ThrottleBackend)
    producer = await Producer.create(SeenQueues, backend)
    for n in range(3):
        await producer.enqueue(One(n=n))
        await producer.enqueue(Free(n=n))
    metrics = Metrics(depth_interval=0.05)
    worker = Worker(SeenQueues, backend, concurrency=8, metrics=metrics)
    release, started, done = asyncio.Event(), asyncio.Event(), [0]

    @worker.handler(One)
    async def one(job: One, ctx: JobContext) -> None:
        started.set()
        await release.wait()
        done[0] += 1

    @worker.handler(Free)
    async def free(job: Free, ctx: JobContext) -> None:
        done[0] += 1

    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 20)
        # while the first runs, the other two are held back by the cap of 1
        for _ in range(200):
            if (sample(metrics, "queuey_jobs_held_back", "one", "concurrency") or 0) >= 2:
                break
            await asyncio.sleep(0.05)
        assert sample(metrics, "queuey_jobs_held_back", "one", "concurrency") == 2
        assert (sample(metrics, "queuey_jobs_throttled_total", "one", "concurrency") or 0) >= 1
        release.set()
        for _ in range(400):
            if done[0] == 6:
                break
            await asyncio.sleep(0.05)
        assert done[0] == 6
    finally:
        release.set()
        worker.shutdown()
        await task
    seen = {(t.queue, t.limit): t for t in backend.throttled()}
    assert set(seen) == {("seen.one", "concurrency")}  # a queue without limits is not counted
    assert seen[("seen.one", "concurrency")].claims >= 2  # held 2, then 1
    assert seen[("seen.one", "concurrency")].held == 0  # the last claim held nothing back
    assert sample(metrics, "queuey_jobs_throttled_total", "free", "concurrency") is None
