"""A worker process for the schedule test: fires ``Schedule(every="1s")`` and records every run
of its job in ``<schema>.runs``.

Usage: ``python -m tests.integration.postgres.schedule_app URL SCHEMA``.
"""

from __future__ import annotations

import asyncio
import os
import sys

from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from queuey import Job, JobContext, Queue, QueueSet, Schedule, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.cli import run_until_signal


class Timed(QueueSet, prefix="timed"):
    ticks = Queue(prefetch=4)


class Tick(Job[Timed], queue=Timed.ticks, name="timed.Tick"):
    pass


async def main(url: str, schema: str) -> None:
    backend = await PostgresBackend.connect(url, schema=schema, lease="1s", poll_interval="1s")
    insert = sql.SQL("INSERT INTO {} (job_id, pid) VALUES (%s, %s)").format(
        sql.Identifier(schema, "runs")
    )
    async with AsyncConnectionPool(
        url, min_size=1, max_size=2, open=False, kwargs={"autocommit": True}
    ) as pool:
        schedule = Schedule(every="1s", job=Tick(), name="tick")
        worker = Worker(Timed, backend, schedules=[schedule], close_backend_on_shutdown=True)

        @worker.handler(Tick)
        async def tick(job: Tick, ctx: JobContext) -> None:
            async with pool.connection() as conn:
                await conn.execute(insert, (ctx.job_id, os.getpid()))

        print("ready", flush=True)
        await run_until_signal(worker.run, worker.shutdown)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
