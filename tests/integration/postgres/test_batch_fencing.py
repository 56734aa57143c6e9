"""A batch handler's outcomes are fenced per row on PostgreSQL: a row of the batch whose claim
was lost while the batch ran (its lease expired and another worker took it) is not completed by
the stale batch, while the other rows of the same batch are."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from psycopg import sql

from queuey import BatchContext, Job, Producer, Queue, QueueSet, RetryPolicy, Worker
from queuey.backends.postgres import PostgresBackend
from tests.integration.postgres.dashboard_helpers import execute
from tests.integration.postgres.test_lease_lost import take_over

pytestmark = pytest.mark.postgres


class FencedQueues(QueueSet, prefix="batchfence"):
    work = Queue(prefetch=10)


class Mail(
    Job[FencedQueues],
    queue=FencedQueues.work,
    name="batchfence.Mail",
    retry=RetryPolicy.fixed(3, "1h"),
):
    n: int


async def rows(url: str, schema: str) -> dict[str, tuple[str, str | None]]:
    table = sql.Identifier(schema, "queue_message")
    found = await execute(url, sql.SQL("SELECT id::text, status, claimed_by FROM {}").format(table))
    return {row[0]: (row[1], row[2]) for row in found}


@pytest.mark.parametrize("outcome", ["ack", "retry"])
async def test_a_stale_batch_does_not_settle_a_row_it_lost(
    database_url: str, pg_schema: str, outcome: str
) -> None:
    backend = PostgresBackend(database_url, schema=pg_schema, lease="30s")
    async with backend:
        producer = await Producer.create(FencedQueues, backend)
        ids = [await producer.enqueue(Mail(n=n)) for n in range(3)]
        lost = ids[1]
        worker = Worker(FencedQueues, backend, concurrency=10)
        calls: list[list[str]] = []

        @worker.batch_handler(Mail, size=3, wait="2s")
        async def handle(jobs: list[Mail], ctx: BatchContext) -> list[BaseException | None]:
            calls.append([c.job_id for c in ctx.jobs])
            await take_over(database_url, pg_schema, lost)  # as another worker would
            failure = ValueError("try later") if outcome == "retry" else None
            return [failure] * len(jobs)

        running = asyncio.create_task(worker.run())
        stats: Any = worker.stats[FencedQueues.work.name]
        try:
            async with asyncio.timeout(20):
                while stats.succeeded + stats.retried + worker.settle_failures < 3:
                    await asyncio.sleep(0.02)
        finally:
            worker.shutdown()
            await asyncio.wait_for(running, 10)
        after = await rows(database_url, pg_schema)
    assert [sorted(call) for call in calls] == [sorted(ids)]  # one call, all three
    assert after[lost] == ("running", "elsewhere:1:0")  # untouched: the other worker's now
    settled = "done" if outcome == "ack" else "pending"
    assert {after[i][0] for i in ids if i != lost} == {settled}
    assert worker.settle_failures == 1
