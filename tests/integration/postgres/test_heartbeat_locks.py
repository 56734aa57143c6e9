"""The heartbeat never waits for a row another transaction has locked (an ack, a cancel, a
handler's transaction of the same worker): it renews the other rows' leases meanwhile and
cannot deadlock with a statement that locks the same rows in another order."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg import sql

from queuey import Producer
from queuey.backends.postgres import PostgresBackend
from tests.integration.postgres.workflow_app import Count, FlowQueues

pytestmark = pytest.mark.postgres


async def test_a_locked_row_neither_stalls_the_heartbeat_nor_deadlocks_it(
    database_url: str, pg_schema: str
) -> None:
    table = sql.Identifier(pg_schema, "queue_message")
    lease_left = sql.SQL("SELECT lease_until > now() FROM {} WHERE id = %s").format(table)
    touch = sql.SQL("UPDATE {} SET progress = progress WHERE id = %s").format(table)
    async with PostgresBackend(database_url, schema=pg_schema, lease="1200ms") as backend:
        producer = await Producer.create(FlowQueues, backend)
        await producer.enqueue_many([Count(text="a"), Count(text="b")])
        consumer = backend.consumer(FlowQueues.steps.config)
        first, second = await consumer.next(), await consumer.next()
        assert first is not None and second is not None
        a, b = sorted([first.envelope.job_id, second.envelope.job_id])
        async with (
            await psycopg.AsyncConnection.connect(database_url) as locker,
            await psycopg.AsyncConnection.connect(database_url, autocommit=True) as reader,
        ):
            await locker.execute(touch, (b,))  # b locked until locker commits
            await asyncio.sleep(1.5)  # longer than the lease: renewed by beats every 0.4 s
            row = await (await reader.execute(lease_left, (a,))).fetchone()
            assert row == (True,), "the heartbeat stalled behind the locked row"
            async with asyncio.timeout(0.9):  # a deadlock is detected after 1 s
                await locker.execute(touch, (a,))  # the other order
            await locker.commit()
        await asyncio.sleep(0.5)
        for delivery in (first, second):
            assert not delivery.lease_lost
            await delivery.ack("1")
