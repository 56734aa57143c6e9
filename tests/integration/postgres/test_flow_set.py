"""Limits set and pauses made at run time, on a real PostgreSQL (``Admin``, what ``queuey
queues`` runs): they take effect at the next claim of every worker (two backends here, each
with its own connections, as two processes have), the declared limits come back on reset, and
each change is in the audit log with who, and what, old -> new."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import Admin, PgDashboardStore, PostgresBackend
from queuey.limits import parse_limit

pytestmark = pytest.mark.postgres


class SetQueues(QueueSet, prefix="setflow"):
    work = Queue(prefetch=8)


class Work(Job[SetQueues], queue=SetQueues.work, name="setflow.Work"):
    n: int


@pytest.fixture
async def backends(database_url: str, pg_schema: str) -> AsyncIterator[list[PostgresBackend]]:
    async with (
        PostgresBackend(database_url, schema=pg_schema, poll_interval="30s") as one,
        PostgresBackend(database_url, schema=pg_schema, poll_interval="30s") as two,
    ):
        yield [one, two]


async def run_batch(backends: list[PostgresBackend], first: int, count: int) -> int:
    """Enqueue ``count`` jobs and run them on one worker per backend; the most run at once."""
    running, peak, done = [0], [0], asyncio.Event()
    finished: list[int] = []
    workers = [Worker(SetQueues, backend, concurrency=4) for backend in backends]
    for worker in workers:

        @worker.handler(Work)
        async def handle(job: Work, ctx: JobContext) -> None:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            await asyncio.sleep(0.1)
            running[0] -= 1
            finished.append(job.n)
            if len(finished) == count:
                done.set()

    tasks = [asyncio.create_task(worker.run()) for worker in workers]
    try:
        await asyncio.sleep(0.3)  # both workers wait on their claim
        producer = await Producer.create(SetQueues, backends[0])
        await producer.enqueue_many([Work(n=n) for n in range(first, first + count)])
        await asyncio.wait_for(done.wait(), 30)
    finally:
        for worker in workers:
            worker.shutdown()
        await asyncio.gather(*tasks)
    assert sorted(finished) == list(range(first, first + count))  # each ran once
    return peak[0]


async def test_limits_set_at_run_time_hold_across_workers_until_reset(
    backends: list[PostgresBackend], database_url: str, pg_schema: str
) -> None:
    admin = Admin(database_url, schema=pg_schema, actor="ops:ann")
    assert await run_batch(backends, 0, 8) > 1  # declared: no limit
    changed = await admin.set_limits("setflow.work", [parse_limit("concurrency 1")])
    assert changed == "declared -> concurrency 1"
    assert await run_batch(backends, 100, 8) == 1  # the set cap holds across both workers
    throttled = [t for b in backends for t in b.throttled() if t.queue == "setflow.work"]
    assert any(t.limit == "concurrency" and t.claims > 0 for t in throttled)  # counted too
    assert await admin.set_limits("setflow.work", None) == "concurrency 1 -> declared"
    assert await run_batch(backends, 200, 8) > 1  # the declared limits again
    async with PgDashboardStore(database_url, schema=pg_schema) as store:
        entries = [e for e in await store.audit() if e.action == "set limits"]
    assert [(e.actor, e.queue, e.filter) for e in reversed(entries)] == [
        ("ops:ann", "setflow.work", "declared -> concurrency 1"),
        ("ops:ann", "setflow.work", "concurrency 1 -> declared"),
    ]


async def test_a_pause_from_admin_holds_every_worker_and_resume_wakes_them(
    backends: list[PostgresBackend], database_url: str, pg_schema: str
) -> None:
    admin = Admin(database_url, schema=pg_schema, actor="ops:bob")
    assert await admin.pause_queue("setflow.work") is True
    pauses, _ = await admin.flow_state()
    assert [(p.kind, p.queue, p.paused_by) for p in pauses] == [("job", "setflow.work", "ops:bob")]
    producer = await Producer.create(SetQueues, backends[0])
    await producer.enqueue_many([Work(n=n) for n in range(3)])
    workers = [Worker(SetQueues, backend, concurrency=2) for backend in backends]
    handled: list[int] = []
    for worker in workers:

        @worker.handler(Work)
        async def handle(job: Work, ctx: JobContext) -> None:
            handled.append(job.n)

    tasks = [asyncio.create_task(worker.run()) for worker in workers]
    try:
        await asyncio.sleep(1.0)
        assert handled == []  # paused: no worker claims
        assert await admin.resume_queue("setflow.work") is True
        async with asyncio.timeout(10):  # a 30 s poll: the resume's notification woke them
            while len(handled) < 3:
                await asyncio.sleep(0.05)
    finally:
        for worker in workers:
            worker.shutdown()
        await asyncio.gather(*tasks)
    assert sorted(handled) == [0, 1, 2]
