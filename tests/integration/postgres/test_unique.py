"""Unique jobs on PostgreSQL: concurrent producers on separate connections, the caller's
transaction (committed and rolled back), a lease reclaim, the key released or kept per the
states, and the plain statements left as they were."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from psycopg import sql

from queuey import Job, Producer, Queue, QueueSet, Unique
from queuey.backends.postgres import PostgresBackend
from queuey.backends.postgres._sql import Statements

pytestmark = pytest.mark.postgres


class UniqueQueues(QueueSet, prefix="uq"):
    sync = Queue(prefetch=8)


class SyncAccount(
    Job[UniqueQueues], queue=UniqueQueues.sync, name="uq.Sync", unique=Unique(by=("account_id",))
):
    account_id: int
    note: str = ""


class Plain(Job[UniqueQueues], queue=UniqueQueues.sync, name="uq.Plain"):
    n: int = 0


@pytest.fixture
def backend_settings() -> dict[str, Any]:
    return {"poll_interval": "30s", "lease": "1s"}


async def rows(url: str, schema: str, *columns: str) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT {} FROM {} ORDER BY seq").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        sql.Identifier(schema, "queue_message"),
    )
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        return await (await conn.execute(query)).fetchall()


async def test_twenty_concurrent_producers_make_one_row(database_url: str, pg_schema: str) -> None:
    backends = [
        await PostgresBackend.connect(database_url, schema=pg_schema, pool_size=1)
        for _ in range(20)
    ]
    try:
        producers = [Producer.undeclared(UniqueQueues, b) for b in backends]
        start = asyncio.Event()

        async def enqueue(producer: Producer[UniqueQueues], n: int) -> Any:
            await start.wait()
            return await producer.enqueue(SyncAccount(account_id=7, note=str(n)))

        tasks = [asyncio.create_task(enqueue(p, n)) for n, p in enumerate(producers)]
        await asyncio.sleep(0.2)  # every connection open, every task waiting
        start.set()
        results = await asyncio.gather(*tasks)
    finally:
        for b in backends:
            await b.close()
    assert sum(r.inserted for r in results) == 1
    assert len({r.job_id for r in results}) == 1
    assert [str(r[0]) for r in await rows(database_url, pg_schema, "id")] == [results[0].job_id]


async def test_inside_the_callers_transaction(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(UniqueQueues, backend)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        async with conn.transaction():
            first = await producer.enqueue(SyncAccount(account_id=1), connection=conn)
            again = await producer.enqueue(SyncAccount(account_id=1), connection=conn)
            many = await producer.enqueue_many(
                [SyncAccount(account_id=1), SyncAccount(account_id=2)], connection=conn
            )
            assert first.inserted and (again, again.inserted) == (first, False)
            assert [r.inserted for r in many] == [False, True] and many[0] == first
            try:
                async with conn.transaction():  # a savepoint rolled back
                    await producer.enqueue(SyncAccount(account_id=3), connection=conn)
                    raise RuntimeError("roll back")
            except RuntimeError:
                pass
    assert len(await rows(database_url, pg_schema, "id")) == 2
    assert (await producer.enqueue(SyncAccount(account_id=3))).inserted


async def test_a_rolled_back_transaction_leaves_nothing_and_the_key_free(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(UniqueQueues, backend)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        result = await producer.enqueue(SyncAccount(account_id=1), connection=conn)
        await producer.enqueue_after(SyncAccount(account_id=2), "1h", connection=conn)
        assert result.inserted
        await conn.rollback()
    assert await rows(database_url, pg_schema, "id") == []
    again = await producer.enqueue(SyncAccount(account_id=1))
    assert again.inserted and again != result


async def test_a_lease_reclaim_keeps_the_key(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(UniqueQueues, backend)
    first = await producer.enqueue(SyncAccount(account_id=1))
    claims = await backend.claim(SyncAccount.job_queue().config, 1)
    assert claims is not None and claims[0][0] == first
    backend._held.clear()  # as if the worker died: no heartbeat
    await asyncio.sleep(1.2)
    await backend.sweep()
    assert await rows(database_url, pg_schema, "status", "redeliveries") == [("pending", 1)]
    again = await producer.enqueue(SyncAccount(account_id=1))
    assert (again, again.inserted) == (first, False)


async def test_the_key_column_is_set_only_while_held(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(UniqueQueues, backend)
    await producer.enqueue(Plain(n=1))
    await producer.enqueue(SyncAccount(account_id=5))
    found = await rows(database_url, pg_schema, "unique_key", "unique_states")
    assert found[0] == (None, 0)
    assert found[1][0] == "job:uq.sync:uq.Sync:[5]" and found[1][1] == 3


def test_the_plain_statements_do_no_unique_work() -> None:
    statements = Statements("queuey", "queue_message")
    for name in ("publish", "publish_one", "publish_job"):
        text = statements[name].as_string(None)
        assert "unique" not in text and "ON CONFLICT" not in text, name
