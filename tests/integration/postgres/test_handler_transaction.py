"""``ctx.transaction()`` on a real PostgreSQL: the handler's writes and the job's completion
commit together or not at all, fenced by (owner, attempt); a worker SIGKILLed between the
write and the commit leaves neither, and the redelivery commits both; a cancelled job's late
completion is refused."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from queuey import BackendError, JobContext, NotSupportedError, Producer, Worker
from queuey.backends.memory import MemoryBackend
from queuey.backends.postgres import PostgresBackend
from tests.helpers import ROOT, python_path, run_until
from tests.integration.postgres.txn_app import TxnQueues, Write

pytestmark = pytest.mark.postgres


@pytest.fixture
async def schema(database_url: str, pg_schema: str) -> AsyncIterator[str]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("CREATE TABLE {} (n int)").format(sql.Identifier(pg_schema, "writes"))
        )
    yield pg_schema


async def rows(url: str, query: str, schema: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(query.replace("{s}", f'"{schema}"'))
        return await cursor.fetchall()


async def execute(url: str, statement: str, schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(statement.replace("{s}", f'"{schema}"'))


async def writes(url: str, schema: str) -> list[int]:
    return [n for (n,) in await rows(url, "SELECT n FROM {s}.writes ORDER BY n", schema)]


async def statuses(url: str, schema: str) -> list[tuple[str, int]]:
    query = "SELECT status, attempts FROM {s}.queue_message ORDER BY seq"
    return [(status, attempts) for status, attempts in await rows(url, query, schema)]


def insert_into(schema: str) -> sql.Composed:
    return sql.SQL("INSERT INTO {} (n) VALUES (%s)").format(sql.Identifier(schema, "writes"))


async def test_the_write_and_the_completion_commit_together(database_url: str, schema: str) -> None:
    async with await PostgresBackend.connect(database_url, schema=schema) as backend:
        producer = await Producer.create(TxnQueues, backend)
        worker = Worker(TxnQueues, backend)
        done: list[int] = []

        @worker.handler(Write)
        async def write(job: Write, ctx: JobContext) -> None:
            async with ctx.transaction() as conn:
                await conn.execute(insert_into(schema), (job.n,))
            done.append(job.n)

        await producer.enqueue_many([Write(n=1), Write(n=2)])
        await run_until(worker, lambda: sum(s.succeeded for s in worker.stats.values()) == 2)
    assert sorted(done) == [1, 2] and worker.settle_failures == 0
    assert await writes(database_url, schema) == [1, 2]
    assert await statuses(database_url, schema) == [("done", 1), ("done", 1)]


async def test_a_failure_inside_rolls_the_write_back_and_retries(
    database_url: str, schema: str
) -> None:
    async with await PostgresBackend.connect(database_url, schema=schema) as backend:
        producer = await Producer.create(TxnQueues, backend)
        worker = Worker(TxnQueues, backend)

        @worker.handler(Write)
        async def write(job: Write, ctx: JobContext) -> None:
            async with ctx.transaction() as conn:
                await conn.execute(insert_into(schema), (job.n * 10 + ctx.attempt,))
                if ctx.attempt == 1:
                    raise RuntimeError("boom after the write")

        await producer.enqueue(Write(n=1))
        stats = worker.stats[TxnQueues.work.name]
        await run_until(worker, lambda: stats.dead == 1)  # no retry policy: dead at once
    assert await writes(database_url, schema) == []  # attempt 1's write was rolled back
    assert await statuses(database_url, schema) == [("failed", 1)]


async def test_a_lost_claim_rolls_back_and_is_logged(
    database_url: str, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with await PostgresBackend.connect(database_url, schema=schema) as backend:
        producer = await Producer.create(TxnQueues, backend)
        worker = Worker(TxnQueues, backend)
        errors: list[str] = []

        @worker.handler(Write)
        async def write(job: Write, ctx: JobContext) -> None:
            try:
                async with ctx.transaction() as conn:
                    await conn.execute(insert_into(schema), (job.n,))
                    # another worker took the row after our lease expired
                    await execute(
                        database_url,
                        "UPDATE {s}.queue_message SET claimed_by = 'someone else'",
                        schema,
                    )
            except BackendError as exc:
                errors.append(str(exc))
                raise

        await producer.enqueue(Write(n=7))
        stats = worker.stats[TxnQueues.work.name]
        with caplog.at_level(logging.ERROR, "queuey"):
            # The refused retry is a settle failure; if the heartbeat (run at once when the
            # LISTEN session comes up) saw the row go first, the run was stopped as a lost one.
            await run_until(worker, lambda: worker.settle_failures + stats.cancelled == 1)
    assert errors and "claim was lost" in errors[0]
    assert "not completed in the handler's transaction" in caplog.text
    assert await writes(database_url, schema) == []
    assert await statuses(database_url, schema) == [("running", 1)]  # someone else's now


async def test_a_cancelled_jobs_completion_is_refused(database_url: str, schema: str) -> None:
    async with await PostgresBackend.connect(database_url, schema=schema) as backend:
        producer = await Producer.create(TxnQueues, backend)
        worker = Worker(TxnQueues, backend, cancel_grace="10s")
        started, go = asyncio.Event(), asyncio.Event()
        errors: list[str] = []

        @worker.handler(Write)
        async def write(job: Write, ctx: JobContext) -> None:
            started.set()
            await go.wait()  # ignores the cancel: completes anyway
            try:
                async with ctx.transaction() as conn:
                    await conn.execute(insert_into(schema), (job.n,))
            except BackendError as exc:
                errors.append(str(exc))

        job_id = await producer.enqueue(Write(n=3))
        running = asyncio.create_task(worker.run())
        await asyncio.wait_for(started.wait(), 10)
        assert await producer.cancel(job_id) == "requested"
        go.set()
        stats = worker.stats[TxnQueues.work.name]
        async with asyncio.timeout(10):
            while stats.cancelled == 0:
                await asyncio.sleep(0.02)
        worker.shutdown()
        await running
    assert errors and "was cancelled while it ran" in errors[0]
    assert worker.settle_failures == 0
    assert await writes(database_url, schema) == []
    assert await statuses(database_url, schema) == [("cancelled", 1)]


async def test_other_backends_refuse_a_transaction() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(TxnQueues, backend)
    worker = Worker(TxnQueues, backend)
    errors: list[str] = []

    @worker.handler(Write)
    async def write(job: Write, ctx: JobContext) -> None:
        try:
            ctx.transaction()
        except NotSupportedError as exc:
            errors.append(str(exc))

    await producer.enqueue(Write(n=1))
    await run_until(worker, lambda: bool(errors))
    assert errors == [
        "ctx.transaction() needs the PostgreSQL backend; this backend has no database to "
        "commit a job with"
    ]


def start(url: str, schema: str, mode: str) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "tests.integration.postgres.txn_app", url, schema, mode]
    env = {**os.environ, "PYTHONPATH": python_path()}
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


async def read_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 20) -> str:
    assert proc.stdout is not None
    async with asyncio.timeout(timeout):
        while True:
            line = await asyncio.to_thread(proc.stdout.readline)
            assert line, f"the worker exited ({proc.poll()}) before printing {prefix!r}"
            if line.startswith(prefix):
                return line.strip()


async def test_a_worker_killed_between_write_and_commit_leaves_neither(
    database_url: str, schema: str
) -> None:
    async with await PostgresBackend.connect(database_url, schema=schema) as backend:
        producer = await Producer.create(TxnQueues, backend)
        await producer.enqueue(Write(n=42))
    first = start(database_url, schema, "hang")
    try:
        assert await read_line(first, "wrote") == "wrote 42 attempt 1"
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    assert await writes(database_url, schema) == []
    assert await statuses(database_url, schema) == [("running", 1)]  # held until its lease ends
    second = start(database_url, schema, "commit")
    try:
        assert await read_line(second, "wrote") == "wrote 42 attempt 2"

        async def done() -> bool:
            return await statuses(database_url, schema) == [("done", 2)]

        async with asyncio.timeout(20):
            while not await done():
                await asyncio.sleep(0.1)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(15)
        assert second.stdout is not None
        second.stdout.close()
        if first.stdout is not None:
            first.stdout.close()
    assert await writes(database_url, schema) == [42]  # once: both present together
