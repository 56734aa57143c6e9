"""Batched statements on a real database: a fenced batch ack that refuses only the row whose
claim was lost, a bulk publish whose text survives the array literals byte for byte and in
order, and the single-row publish."""

from __future__ import annotations

import asyncio

import pytest
from psycopg import sql

from queuey import BackendError, Job, Producer, Queue, QueueSet
from queuey.backends.postgres import PostgresBackend
from queuey.backends.postgres._acks import LostClaimError
from tests.integration.postgres.test_backend import execute

pytestmark = pytest.mark.postgres

TRICKY = [
    'quote " backslash \\ brace { } comma , NULL',
    "nul \x00 and \\u0000 literally",
    "é😀 \t tab \n newline",
    "",
]


class BatchQueues(QueueSet, prefix="batch"):
    work = Queue(prefetch=8)


class Text(Job[BatchQueues], queue=BatchQueues.work, name="batch.Text"):
    text: str


async def test_a_batch_ack_refuses_only_the_row_whose_claim_was_lost(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(BatchQueues, backend)
        await producer.enqueue_many([Text(text=str(n)) for n in range(3)])
        consumer = backend.consumer(BatchQueues.work.config)
        deliveries = [await consumer.next() for _ in range(3)]
        assert all(d is not None for d in deliveries)
        stolen = deliveries[1]
        assert stolen is not None
        table = sql.Identifier(pg_schema, "queue_message")
        await execute(
            database_url,
            sql.SQL("UPDATE {} SET claimed_by = 'another worker' WHERE id = %s").format(table),
            stolen.envelope.job_id,
        )
        results = await asyncio.gather(
            *(d.ack() for d in deliveries if d is not None), return_exceptions=True
        )
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], LostClaimError)
        rows = await execute(
            database_url,
            sql.SQL("SELECT payload->>'text', status FROM {} ORDER BY seq").format(table),
        )
        assert rows == [("0", "done"), ("1", "running"), ("2", "done")]
        await consumer.stop()


async def test_bulk_and_single_publishes_keep_text_exactly_and_in_order(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(BatchQueues, backend)
        await producer.enqueue_many([Text(text=t) for t in TRICKY])
        await producer.enqueue(Text(text=TRICKY[0]))
        consumer = backend.consumer(BatchQueues.work.config)
        seen = []
        for _ in range(len(TRICKY) + 1):
            delivery = await consumer.next()
            assert delivery is not None
            seen.append(Text.model_validate(delivery.envelope.payload).text)
            await delivery.ack()
        assert seen == [*TRICKY, TRICKY[0]]
        await consumer.stop()


async def test_publishing_recovers_after_its_kept_connection_is_killed(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(BatchQueues, backend)
        await producer.enqueue(Text(text="first"))
        await producer.enqueue(Text(text="second"))  # through the connection kept for publishes
        await execute(
            database_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            f"queuey {backend.owner}"[:63],
        )
        written = 2
        try:
            await producer.enqueue(Text(text="maybe"))
            written += 1
        except BackendError:
            pass  # the kept connection was dead: this one enqueue fails, and says so
        await producer.enqueue(Text(text="after"))
        assert await backend.count_pending(BatchQueues.work.name) == written + 1
