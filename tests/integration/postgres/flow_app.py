"""A worker process for the flow limit tests: each run records its start and end (database
clock) in ``<schema>.flow_runs``.

Usage: ``python -m tests.integration.postgres.flow_app URL SCHEMA``. Prints ``ready`` once
consuming.
"""

from __future__ import annotations

import asyncio
import os
import sys

from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from queuey import Concurrency, Job, JobContext, Queue, QueueSet, RateLimit, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.cli import run_until_signal

RUNS_DDL = (
    "CREATE TABLE IF NOT EXISTS {} (n int, tenant text, pid int, attempt int, "
    "started timestamptz NOT NULL DEFAULT clock_timestamp(), ended timestamptz)"
)


class FlowApp(QueueSet, prefix="flowp"):
    capped = Queue(prefetch=8, limits=[Concurrency(3, by="tenant")])
    rated = Queue(prefetch=8)


class Capped(Job[FlowApp], queue=FlowApp.capped, name="flowp.Capped"):
    tenant: str
    n: int
    sleep_ms: int = 100


class Rated(Job[FlowApp], queue=FlowApp.rated, name="flowp.Rated",
            limits=[RateLimit(5, per="1s", by="tenant")]):  # fmt: skip
    tenant: str
    n: int


async def main(url: str, schema: str) -> None:
    backend = await PostgresBackend.connect(url, schema=schema, lease="1s", poll_interval="2s")
    runs = sql.Identifier(schema, "flow_runs")
    start = sql.SQL(
        "INSERT INTO {} (n, tenant, pid, attempt) VALUES (%s, %s, %s, %s) RETURNING ctid"
    ).format(runs)
    end = sql.SQL("UPDATE {} SET ended = clock_timestamp() WHERE ctid = %s").format(runs)
    async with AsyncConnectionPool(
        url, min_size=2, max_size=10, open=False, kwargs={"autocommit": True}
    ) as pool:
        worker = Worker(FlowApp, backend, concurrency=8, close_backend_on_shutdown=True)

        @worker.handler(Capped)
        async def capped(job: Capped, ctx: JobContext) -> None:
            async with pool.connection() as conn:
                row = await (await conn.execute(start, (job.n, job.tenant, os.getpid(),
                                                        ctx.attempt))).fetchone()  # fmt: skip
            await asyncio.sleep(job.sleep_ms / 1000)
            async with pool.connection() as conn:
                await conn.execute(end, (row[0] if row else None,))

        @worker.handler(Rated)
        async def rated(job: Rated, ctx: JobContext) -> None:
            async with pool.connection() as conn:
                await conn.execute(start, (job.n, job.tenant, os.getpid(), ctx.attempt))

        print("ready", flush=True)
        await run_until_signal(worker.run, worker.shutdown)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
