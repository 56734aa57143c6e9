"""Jobs and a worker process for the dynamic fan-out and batch tests: ``Split`` fans out to a
``Count`` per word; ``Tally`` is a batch's callback; every handler run is recorded in
``<schema>.runs`` (kind, key, pid) from the handler itself (the workflow app's handlers, plus
``split`` and ``tally``).

Usage: ``python -m tests.integration.postgres.fan_out_app URL SCHEMA``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from queuey import Job, JobContext, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.batches import BatchProgress
from queuey.cli import run_until_signal
from queuey.workflows import FanOut
from tests.integration.postgres.workflow_app import Count, FlowQueues, register


class Split(Job[FlowQueues, FanOut[int]], queue=FlowQueues.steps, name="flows.Split"):
    text: str
    stall_ms: int = 0  # how long its first attempt waits before it fans out
    count_ms: int = 0  # how long each Count it adds runs


class Tally(Job[FlowQueues], queue=FlowQueues.steps, name="flows.Tally"):
    progress: BatchProgress

    @classmethod
    def from_batch(cls, progress: BatchProgress) -> Tally:
        return cls(progress=progress)


def register_split(worker: Worker[FlowQueues], record: Any) -> None:
    """The ``Split`` and ``Tally`` handlers; ``record(kind, key)`` is awaited by each run."""

    @worker.handler(Tally)
    async def tally(job: Tally, ctx: JobContext) -> None:
        p = job.progress
        await record("tally", f"{p.batch_id}|{p.total}|{p.done}|{p.failed}|{p.pending}")

    @worker.handler(Split)
    async def split(job: Split, ctx: JobContext) -> FanOut[int]:
        await record("split", f"{ctx.job_id}|{ctx.attempt}")
        if job.stall_ms and ctx.attempt == 1:
            await asyncio.sleep(job.stall_ms / 1000)
        words = [w for w in job.text.split(" ") if w]
        return FanOut(Count(text=w, key=w, sleep_ms=job.count_ms) for w in words)


async def main(url: str, schema: str) -> None:
    backend = await PostgresBackend.connect(url, schema=schema, lease="1s", poll_interval="300ms")
    insert = sql.SQL("INSERT INTO {} (kind, key, pid) VALUES (%s, %s, %s)").format(
        sql.Identifier(schema, "runs")
    )
    async with AsyncConnectionPool(
        url, min_size=2, max_size=4, open=False, kwargs={"autocommit": True}
    ) as pool:
        worker = Worker(FlowQueues, backend, concurrency=16, close_backend_on_shutdown=True)

        async def record(kind: str, key: str) -> None:
            async with pool.connection() as conn:
                await conn.execute(insert, (kind, key, os.getpid()))

        register(worker, record)
        register_split(worker, record)
        print("ready", flush=True)
        await run_until_signal(worker.run, worker.shutdown)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
