"""Jobs and handlers of the workflow tests, and a worker process for the SIGKILL test: every
handler run is recorded in ``<schema>.runs`` (kind, key, pid) from the handler itself.

Usage: ``python -m tests.integration.postgres.workflow_app URL SCHEMA``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field

from queuey import Job, JobContext, Queue, QueueSet, RetryPolicy, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.cli import run_until_signal
from queuey.workflows import StepFailed


class FlowQueues(QueueSet, prefix="flows"):
    steps = Queue(prefetch=16, retry=RetryPolicy.none())


class Page(BaseModel):
    body: str


class Fetch(Job[FlowQueues, Page], queue=FlowQueues.steps, name="flows.Fetch"):
    url: str


class Count(Job[FlowQueues, int], queue=FlowQueues.steps, name="flows.Count"):
    text: str
    key: str = ""
    sleep_ms: int = 0

    @classmethod
    def from_page(cls, page: Page) -> Count:
        return cls(text=page.body)


class Double(Job[FlowQueues, int], queue=FlowQueues.steps, name="flows.Double"):
    n: int

    @classmethod
    def from_count(cls, n: int) -> Double:
        return cls(n=n)


class Sum(Job[FlowQueues, int], queue=FlowQueues.steps, name="flows.Sum"):
    counts: list[int]
    failed: list[str] = Field(default_factory=list)

    @classmethod
    def from_counts(cls, counts: list[int]) -> Sum:
        return cls(counts=counts)

    @classmethod
    def from_some(cls, counts: list[int | StepFailed]) -> Sum:
        return cls(
            counts=[c for c in counts if isinstance(c, int)],
            failed=[c.error or "" for c in counts if isinstance(c, StepFailed)],
        )


def register(worker: Worker[FlowQueues], record: Any) -> None:
    """The handlers; ``record(kind, key)`` is awaited by each run (``None``: nothing kept)."""

    @worker.handler(Fetch)
    async def fetch(job: Fetch, ctx: JobContext) -> Page:
        return Page(body=f"<{job.url}>")

    @worker.handler(Count)
    async def count(job: Count, ctx: JobContext) -> int:
        if job.text == "boom":
            raise ValueError("boom")
        if job.sleep_ms:
            await asyncio.sleep(job.sleep_ms / 1000)
        await record("count", job.key or ctx.job_id)
        return len(job.text)

    @worker.handler(Double)
    async def double(job: Double, ctx: JobContext) -> int:
        return job.n * 2

    @worker.handler(Sum)
    async def total(job: Sum, ctx: JobContext) -> int:
        await record("sum", f"{ctx.job_id}|{len(job.counts) + len(job.failed)}")
        return sum(job.counts)


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
        print("ready", flush=True)
        await run_until_signal(worker.run, worker.shutdown)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
