"""Two behaviours of a worker's life on PostgreSQL, pinned: the regular maintenance sweep (not
only ``prune()`` called by hand) deletes done rows older than ``retain``; a graceful shutdown
stops claiming and runs to its end what it already started, never handing it back."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest
from psycopg import sql

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend

pytestmark = pytest.mark.postgres


class Life(QueueSet, prefix="life"):
    work = Queue(prefetch=1)


class Step(Job[Life], queue=Life.work, name="life.Step"):
    n: int


async def _row(url: str, schema: str, job_id: str) -> tuple[str, int] | None:
    """The row's (status, attempts), ``None`` when it is gone."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        table = sql.Identifier(schema, "queue_message")
        query = sql.SQL("SELECT status, attempts FROM {} WHERE id = %s").format(table)
        cursor = await conn.execute(query, (job_id,))
        found = await cursor.fetchone()
    return None if found is None else (str(found[0]), int(found[1]))


async def test_the_regular_sweep_deletes_done_rows_older_than_retain(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(
        database_url, schema=pg_schema, retain="1s", poll_interval="200ms"
    ) as backend:
        producer = await Producer.create(Life, backend)
        worker = Worker(Life, backend)

        @worker.handler(Step)
        async def handle(job: Step, ctx: JobContext) -> None:
            pass

        job_id = await producer.enqueue(Step(n=1))
        running = asyncio.create_task(worker.run())
        try:
            seen: list[tuple[str, int] | None] = []
            deadline = time.monotonic() + 20
            while (state := await _row(database_url, pg_schema, job_id)) is not None:
                seen.append(state)
                assert time.monotonic() < deadline, f"the done row was never swept: {seen[-3:]}"
                await asyncio.sleep(0.1)
        finally:
            worker.shutdown()
            await running
    assert ("done", 1) in seen  # it was done (and kept) before the sweep deleted it


async def test_a_graceful_shutdown_finishes_what_it_started_and_claims_nothing_more(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="200ms") as backend:
        producer = await Producer.create(Life, backend)
        worker = Worker(Life, backend, concurrency=1, shutdown_grace="30s")
        started = asyncio.Event()
        runs: list[tuple[int, int]] = []

        @worker.handler(Step)
        async def handle(job: Step, ctx: JobContext) -> None:
            runs.append((job.n, ctx.attempt))
            started.set()
            await asyncio.sleep(1.0)  # still running when the shutdown is asked for

        first = await producer.enqueue(Step(n=1))
        running = asyncio.create_task(worker.run())
        async with asyncio.timeout(15):
            await started.wait()
        worker.shutdown()  # graceful: no claim from now on; the running job runs to its end
        later = await producer.enqueue(Step(n=2))
        async with asyncio.timeout(15):
            await running
        await asyncio.sleep(0.5)  # a claim made after the shutdown would show by now
        assert runs == [(1, 1)]
        assert await _row(database_url, pg_schema, first) == ("done", 1)  # never handed back
        assert await _row(database_url, pg_schema, later) == ("pending", 0)  # never claimed
