"""A worker process for the crash tests: records every run of a job in ``<schema>.runs``.

Usage: ``python -m tests.integration.postgres.crash_app URL SCHEMA MAX_REDELIVERIES``.
A job with ``poison=True`` kills its own process with SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from queuey import Job, JobContext, Queue, QueueSet, RetryPolicy, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.cli import run_until_signal


class CrashQueues(QueueSet, prefix="crash"):
    work = Queue(prefetch=16, retry=RetryPolicy.fixed(5, "100ms"))


class Record(Job[CrashQueues], queue=CrashQueues.work, name="crash.Record"):
    n: int
    poison: bool = False
    sleep_ms: int = 0


async def main(url: str, schema: str, max_redeliveries: int) -> None:
    backend = await PostgresBackend.connect(
        url,
        schema=schema,
        lease="1s",
        poll_interval="300ms",
        max_redeliveries=max_redeliveries,
    )
    insert = sql.SQL("INSERT INTO {} (n, pid) VALUES (%s, %s)").format(
        sql.Identifier(schema, "runs")
    )
    async with AsyncConnectionPool(
        url, min_size=2, max_size=4, open=False, kwargs={"autocommit": True}
    ) as pool:
        worker = Worker(CrashQueues, backend, concurrency=16, close_backend_on_shutdown=True)

        @worker.handler(Record)
        async def record(job: Record, ctx: JobContext) -> None:
            if job.poison:
                os.kill(os.getpid(), signal.SIGKILL)
            async with pool.connection() as conn:
                await conn.execute(insert, (job.n, os.getpid()))
            if job.sleep_ms:
                await asyncio.sleep(job.sleep_ms / 1000)

        print("ready", flush=True)
        await run_until_signal(worker.run, worker.shutdown)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
