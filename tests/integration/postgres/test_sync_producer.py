"""``queuey.sync.Producer`` on a real PostgreSQL through psycopg's synchronous pool: every
method, the caller's own psycopg connection (commit and rollback), 8 threads at once, cancel,
and a worker running what it enqueued."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from queuey import (
    BackendError,
    Job,
    JobContext,
    Queue,
    QueueSet,
    SchemaError,
    ShutDownError,
    Worker,
    sync,
)
from queuey.backends.postgres import PostgresBackend
from tests.helpers import run_until

pytestmark = pytest.mark.postgres


class Shop(QueueSet, prefix="shop"):
    orders = Queue(prefetch=8, max_priority=3, message_ttl="1h")


class Ship(Job[Shop], queue=Shop.orders, name="shop.Ship"):
    order: int


def rows(url: str, schema: str) -> list[tuple[Any, ...]]:
    query = sql.SQL(
        "SELECT payload->>'order', priority, status, available_at > now(), "
        "expires_at IS NOT NULL FROM {} ORDER BY seq"
    ).format(sql.Identifier(schema, "queue_message"))
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query).fetchall()


def test_every_method_writes_what_the_async_producer_writes(
    database_url: str, pg_schema: str
) -> None:
    with sync.PostgresBackend.connect(database_url, schema=pg_schema) as backend:
        producer = sync.Producer.create(Shop, backend)
        producer.enqueue(Ship(order=1))
        producer.enqueue(Ship(order=2), priority=2)
        producer.enqueue_after(Ship(order=3), "1h", priority=1)
        producer.defer(Ship(order=4), "1h")
        producer.enqueue_many([Ship(order=5), Ship(order=6)], delay=0, priority=3)
        with pytest.raises(ValueError, match=r"'shop.orders': 0\.\.3"):
            producer.enqueue(Ship(order=7), priority=4)
    assert rows(database_url, pg_schema) == [
        ("1", 0, "pending", False, True),
        ("2", 2, "pending", False, True),
        ("3", 1, "pending", True, True),
        ("4", 3, "pending", True, True),  # deferred: the queue's top priority
        ("5", 3, "pending", False, True),
        ("6", 3, "pending", False, True),
    ]
    with pytest.raises(ShutDownError):
        producer.enqueue(Ship(order=8))


def test_the_callers_connection_commits_or_rolls_back_the_job(
    database_url: str, pg_schema: str
) -> None:
    with sync.PostgresBackend.connect(database_url, schema=pg_schema) as backend:
        producer = sync.Producer.create(Shop, backend)
        with psycopg.connect(database_url) as conn:
            with conn.transaction():
                producer.enqueue(Ship(order=1), connection=conn)
                producer.enqueue_many([Ship(order=2), Ship(order=3)], connection=conn)
            with pytest.raises(RuntimeError), conn.transaction():
                producer.enqueue(Ship(order=4), connection=conn)
                raise RuntimeError("the business write failed")
        with pytest.raises(TypeError, match="psycopg Connection or Django"):
            producer.enqueue(Ship(order=5), connection="not a connection")
    assert [r[0] for r in rows(database_url, pg_schema)] == ["1", "2", "3"]


def test_eight_threads_enqueueing_at_once_lose_nothing(database_url: str, pg_schema: str) -> None:
    with sync.PostgresBackend.connect(database_url, schema=pg_schema, pool_size=4) as backend:
        producer = sync.Producer.create(Shop, backend)
        barrier = threading.Barrier(8)
        ids: list[list[str]] = [[] for _ in range(8)]

        def enqueue(slot: int) -> None:
            barrier.wait()
            for n in range(25):
                ids[slot].append(producer.enqueue(Ship(order=slot * 100 + n)))
            ids[slot].extend(producer.enqueue_many([Ship(order=-slot), Ship(order=-slot - 50)]))

        threads = [threading.Thread(target=enqueue, args=(slot,)) for slot in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len({job_id for slot in ids for job_id in slot}) == 8 * 27
    assert len(rows(database_url, pg_schema)) == 8 * 27


async def test_a_worker_runs_what_the_sync_producer_enqueued(
    database_url: str, pg_schema: str
) -> None:
    def enqueue() -> tuple[str, str]:
        with sync.PostgresBackend.connect(database_url, schema=pg_schema) as backend:
            producer = sync.Producer.create(Shop, backend)
            ran = producer.enqueue(Ship(order=1))
            gone = producer.enqueue(Ship(order=2))
            assert producer.cancel(gone) == "cancelled"
            assert producer.cancel(str(uuid.uuid4())) == "not_found"
            return ran, gone

    ran, _ = await asyncio.to_thread(enqueue)
    async with await PostgresBackend.connect(
        database_url, schema=pg_schema, poll_interval="200ms"
    ) as backend:
        worker = Worker(Shop, backend)
        seen: list[str] = []

        @worker.handler(Ship)
        async def ship(job: Ship, ctx: JobContext) -> None:
            seen.append(ctx.job_id)

        await run_until(worker, lambda: bool(seen))
        await asyncio.sleep(0.3)
    assert seen == [ran]
    assert [r[2] for r in rows(database_url, pg_schema)] == ["done", "cancelled"]


def test_a_missing_schema_or_database_is_reported(database_url: str) -> None:
    with pytest.raises(SchemaError, match="queuey db migrate"):
        sync.PostgresBackend.connect(database_url, schema=f"missing_{uuid.uuid4().hex[:8]}")
    with pytest.raises(BackendError, match="PostgreSQL"):
        sync.PostgresBackend.connect(
            "postgresql://nobody:secret@127.0.0.1:1/none", connect_timeout=2
        )


def test_a_malformed_id_is_an_unknown_job(database_url: str, pg_schema: str) -> None:
    """As the async producer (tests/conformance/test_job_lookup.py): no job, nothing to cancel."""
    with sync.PostgresBackend.connect(database_url, schema=pg_schema) as backend:
        producer = sync.Producer.create(Shop, backend)
        assert producer.job("not-a-uuid") is None
        assert producer.cancel("abc") == "not_found"
