"""Flow limits enforced in the PostgreSQL claim, in one process: a concurrency cap per key, a
rate limit per key with two windows, a global cap over keyed ones, round robin across keys,
and a throttled job that is not an attempt."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator

import pytest
from psycopg import sql

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.limits import Concurrency, RateLimit
from tests.integration.postgres.worker_processes import execute

pytestmark = pytest.mark.postgres


class FlowQueues(QueueSet, prefix="flow"):
    capped = Queue(prefetch=16)
    rated = Queue(prefetch=16, limits=[RateLimit(4, per="1s", by="tenant")])
    fair = Queue(prefetch=4, limits=[Concurrency(1, by="tenant")])
    paced = Queue(prefetch=16)


class Capped(Job[FlowQueues], queue=FlowQueues.capped, name="flow.Capped",
             limits=[Concurrency(2, by="tenant"), Concurrency(3)]):  # fmt: skip
    tenant: str
    n: int


class Rated(Job[FlowQueues], queue=FlowQueues.rated, name="flow.Rated",
            limits=[RateLimit(6, per="3s", by="tenant")]):  # fmt: skip
    tenant: str
    n: int


class Fair(Job[FlowQueues], queue=FlowQueues.fair, name="flow.Fair"):
    tenant: str
    n: int


@pytest.fixture
async def backend(database_url: str, pg_schema: str) -> AsyncIterator[PostgresBackend]:
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="5s") as pg:
        yield pg


async def drain(worker: Worker[FlowQueues], done: asyncio.Event, timeout: float) -> None:
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(done.wait(), timeout)
    finally:
        worker.shutdown()
        await task


async def test_concurrency_cap_per_key_and_whole_type(backend: PostgresBackend) -> None:
    worker = Worker(FlowQueues, backend, queues=[FlowQueues.capped], concurrency=12)
    running: dict[str, int] = defaultdict(int)
    peaks: dict[str, int] = defaultdict(int)
    done, count = asyncio.Event(), [0]

    @worker.handler(Capped)
    async def handle(job: Capped, ctx: JobContext) -> None:
        running[job.tenant] += 1
        running["*"] += 1
        for key in (job.tenant, "*"):
            peaks[key] = max(peaks[key], running[key])
        await asyncio.sleep(0.05)
        running[job.tenant] -= 1
        running["*"] -= 1
        count[0] += 1
        if count[0] == 24:
            done.set()

    producer = await Producer.create(FlowQueues, backend)
    await producer.enqueue_many([Capped(tenant=t, n=n) for n in range(12) for t in "ab"])
    await drain(worker, done, 30)
    assert peaks["*"] == 3, peaks  # reached, never passed
    assert max(peaks[t] for t in "ab") == 2, peaks


async def test_rate_limit_two_windows_and_throttled_is_no_attempt(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    worker = Worker(FlowQueues, backend, queues=[FlowQueues.rated], concurrency=8)
    starts: dict[str, list[float]] = defaultdict(list)
    attempts: list[int] = []
    done = asyncio.Event()

    @worker.handler(Rated)
    async def handle(job: Rated, ctx: JobContext) -> None:
        starts[job.tenant].append(time.monotonic())
        attempts.append(ctx.attempt)
        if sum(map(len, starts.values())) == 16:
            done.set()

    producer = await Producer.create(FlowQueues, backend)
    await producer.enqueue_many([Rated(tenant=t, n=n) for n in range(8) for t in "ab"])
    began = time.monotonic()
    await drain(worker, done, 30)
    took = time.monotonic() - began
    assert set(attempts) == {1}  # held back, not retried
    for tenant, times in starts.items():
        assert len(times) == 8
        for i, t in enumerate(times):  # no 1 s window holds more than 4 of a key
            assert sum(1 for u in times[i:] if u - t < 0.95) <= 4, (tenant, times)
        # 6 per 3 s: the 7th start of a key waits for the first to leave the window
        assert times[6] - times[0] >= 2.9, (tenant, times)
    assert took < 12, took  # slept until the next start, not until the poll
    rows = await execute(
        database_url,
        sql.SQL("SELECT count(*) FROM {} WHERE attempts <> 1").format(
            sql.Identifier(pg_schema, "queue_message")
        ),
    )
    assert rows[0][0] == 0


async def test_keys_take_turns(backend: PostgresBackend) -> None:
    worker = Worker(FlowQueues, backend, queues=[FlowQueues.fair], concurrency=3)
    order: list[str] = []
    done = asyncio.Event()

    @worker.handler(Fair)
    async def handle(job: Fair, ctx: JobContext) -> None:
        order.append(job.tenant)
        await asyncio.sleep(0.02)
        if len(order) == 13:
            done.set()

    producer = await Producer.create(FlowQueues, backend)  # a's backlog first, in claim order
    await producer.enqueue_many([Fair(tenant="a", n=n) for n in range(10)])
    await producer.enqueue_many([Fair(tenant=t, n=0) for t in "bcd"])
    await drain(worker, done, 30)
    # b, c and d each start before a's third job: a's backlog does not hold them back
    assert all(order.index(t) < [i for i, x in enumerate(order) if x == "a"][2] for t in "bcd"), (
        order
    )


class Paced(Job[FlowQueues], queue=FlowQueues.paced, name="flow.Paced",
            limits=[RateLimit(5, per="1s")]):  # fmt: skip
    n: int


async def test_a_claim_that_fills_a_window_wakes_when_it_frees(backend: PostgresBackend) -> None:
    """A claim that takes a key's whole room (none held before it) says when that room comes
    back, so the worker does not wait for the poll (5 s here) between windows."""
    worker = Worker(FlowQueues, backend, queues=[FlowQueues.paced], concurrency=16)
    starts: list[float] = []
    done = asyncio.Event()

    @worker.handler(Paced)
    async def handle(job: Paced, ctx: JobContext) -> None:
        starts.append(time.monotonic())
        if len(starts) == 15:
            done.set()

    producer = await Producer.create(FlowQueues, backend)
    await producer.enqueue_many([Paced(n=n) for n in range(15)])
    await drain(worker, done, 30)
    assert 1.9 <= starts[-1] - starts[0] < 4.5, [round(s - starts[0], 2) for s in starts]
