"""Claims never outrun what a worker can start, on PostgreSQL: a worker claims no more rows than
it has free handler slots, so a row never waits claimed behind a slow job while another worker
idles, a worker killed with rows it never started leaves them uncharged (``redeliveries`` 0),
and a worker whose heartbeat stalled never starts a row that another worker took over."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest
from psycopg import sql

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend
from tests.integration.postgres.threads_app import Nap, ThreadQueues, runs_ddl
from tests.integration.postgres.worker_processes import (
    WorkerProcess,
    execute,
    message_rows,
    run_rows,
    wait_for,
)

pytestmark = pytest.mark.postgres


class ClaimQueues(QueueSet, prefix="claims"):
    work = Queue(prefetch=16)


class Task(Job[ClaimQueues], queue=ClaimQueues.work, name="claims.Task"):
    n: int
    seconds: float = 0.0


@pytest.fixture
def backend_settings() -> dict[str, Any]:
    return {"poll_interval": "300ms"}


async def running_rows(url: str, schema: str) -> int:
    rows = await execute(
        url,
        sql.SQL("SELECT count(*) FROM {} WHERE status = 'running'").format(
            sql.Identifier(schema, "queue_message")
        ),
    )
    return int(rows[0][0])


def recording_worker(
    backend: PostgresBackend, runs: list[tuple[str, int]], name: str
) -> Worker[ClaimQueues]:
    worker = Worker(ClaimQueues, backend, concurrency=1)

    @worker.handler(Task)
    async def handle(job: Task, ctx: JobContext) -> None:
        runs.append((name, job.n))
        await asyncio.sleep(job.seconds)

    return worker


async def test_a_busy_worker_leaves_what_it_cannot_start_to_an_idle_one(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(ClaimQueues, backend)
    await producer.enqueue(Task(n=0, seconds=4))
    await producer.enqueue_many([Task(n=n) for n in range(1, 8)])
    runs: list[tuple[str, int]] = []
    busy = recording_worker(backend, runs, "busy")
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="300ms") as other:
        idle = recording_worker(other, runs, "idle")
        busy_task = asyncio.create_task(busy.run())
        try:
            async with asyncio.timeout(10):
                while busy.in_flight < 1:
                    await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)
            claimed = await running_rows(database_url, pg_schema)
            idle_task = asyncio.create_task(idle.run())
            try:
                async with asyncio.timeout(3):  # long before the slow job ends
                    while idle.stats[ClaimQueues.work.name].succeeded < 7:
                        await asyncio.sleep(0.05)
            finally:
                idle.shutdown()
                await idle_task
        finally:
            busy.shutdown()
            await busy_task
    assert claimed == 1, "a worker with one slot claims one row"
    assert sorted(n for name, n in runs if name == "idle") == list(range(1, 8))
    assert [n for name, n in runs if name == "busy"] == [0]


async def test_a_killed_worker_leaves_the_rows_it_never_started_uncharged(
    database_url: str, pg_schema: str
) -> None:
    await execute(database_url, runs_ddl(pg_schema))
    async with PostgresBackend(database_url, schema=pg_schema, lease="1s") as backend:
        producer = await Producer.create(ThreadQueues, backend)
        await producer.enqueue(Nap(n=0, sleep_ms=20_000))
        await producer.enqueue_many([Nap(n=n, sleep_ms=10) for n in range(1, 8)])
        worker = WorkerProcess(database_url, pg_schema, concurrency=1).start()
        try:

            async def started() -> bool:
                return len(await run_rows(database_url, pg_schema)) == 1

            await wait_for(started, timeout=30)
            await asyncio.sleep(0.5)
            worker.signal(signal.SIGKILL)
            await worker.exited(timeout=10)
        finally:
            worker.stop()
        await asyncio.sleep(1.3)  # the lease of what it held expires
        await backend.sweep()
        rows = await message_rows(database_url, pg_schema)
    assert rows[0][:3] == ("pending", 1, 1), "the job it ran was lost with it"
    for n in range(1, 8):
        assert rows[n][:3] == ("pending", 0, 0), f"job {n} was never started: {rows[n]}"


async def test_a_stalled_heartbeat_never_starts_a_job_twice(
    database_url: str, pg_schema: str
) -> None:
    """A worker whose heartbeat stalls loses its leases; the rows are reclaimed and run
    elsewhere. It must never start any of them afterwards from rows it had claimed ahead."""
    runs: list[tuple[str, int]] = []
    async with (
        PostgresBackend(database_url, schema=pg_schema, lease="1s", poll_interval="300ms") as a,
        PostgresBackend(database_url, schema=pg_schema, lease="1s", poll_interval="300ms") as b,
    ):

        async def stalled() -> None:
            await asyncio.Event().wait()

        a._maintenance.heartbeat = stalled  # type: ignore[method-assign]
        producer = await Producer.create(ClaimQueues, a)
        await producer.enqueue(Task(n=0, seconds=2.5))
        await producer.enqueue_many([Task(n=n) for n in range(1, 6)])
        stalling = recording_worker(a, runs, "stalling")
        healthy = recording_worker(b, runs, "healthy")
        stalling_task = asyncio.create_task(stalling.run())
        try:
            async with asyncio.timeout(10):
                while stalling.in_flight < 1:
                    await asyncio.sleep(0.02)
            healthy_task = asyncio.create_task(healthy.run())
            try:
                async with asyncio.timeout(15):
                    while sorted({n for _, n in runs}) != list(range(6)):
                        await asyncio.sleep(0.05)
                    await asyncio.sleep(3)  # the stalled worker's slow job has ended since
            finally:
                healthy.shutdown()
                await healthy_task
        finally:
            stalling.shutdown()
            await stalling_task
    for n in range(1, 6):
        assert [name for name, m in runs if m == n] == ["healthy"], runs
