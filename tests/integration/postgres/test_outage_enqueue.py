"""While PostgreSQL is unreachable, every enqueue path fails within ``publish_timeout`` with a
``BackendUnavailableError`` saying so and for how long it was tried, the HTTP endpoint answers
503 with ``Retry-After``, and a worker's ``/ready`` says the database is unreachable; once the
database is back, all of them work again.

Each runs twice (``outages.outage``): through a TCP proxy that is cut (every connection
dropped, new ones refused), private to the test; and, ``serial``, with the machine's
PostgreSQL stopped and started."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from queuey import (
    BackendUnavailableError,
    Job,
    JobContext,
    Producer,
    Queue,
    QueueSet,
    Unique,
    Worker,
)
from queuey.backends.postgres import PostgresBackend, SyncPostgresBackend
from queuey.http import AccessPolicy, publish_app
from queuey.observability import HealthServer
from queuey.sync import Producer as SyncProducer
from queuey.topics import QueuesConfig, TopicPublisher
from tests.integration.postgres.outages import Outage
from tests.unit.http.http_fakes import client, http_config

pytestmark = pytest.mark.postgres

BOUND = 1.0  # publish_timeout in these tests (seconds)
SLACK = 3.0  # how much later than BOUND a loaded 2-core machine may answer


class DownQueues(QueueSet, prefix="down"):
    work = Queue(prefetch=2)


class Note(Job[DownQueues], queue=DownQueues.work, name="down.Note"):
    n: int


class OneNote(
    Job[DownQueues], queue=DownQueues.work, name="down.OneNote", unique=Unique(by=("n",))
):
    n: int


async def fails_in_time(call: Callable[[], Awaitable[Any]]) -> tuple[str, float]:
    """The message of the ``BackendUnavailableError`` ``call`` raised and how long it took."""
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError) as caught:
        await call()
    took = time.monotonic() - started
    assert took < BOUND + SLACK, f"took {took:.1f}s, bound {BOUND}s: {caught.value}"
    return str(caught.value), took


def says_unreachable(message: str) -> None:
    assert "is unreachable" in message, message
    assert f"trying for {BOUND:g}s (publish_timeout)" in message, message
    assert "nothing was written" in message, message


async def eventually(call: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    """``call()`` once it stops raising ``BackendUnavailableError`` (the pool reconnects)."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                return await call()
            except BackendUnavailableError:
                await asyncio.sleep(0.2)


async def count(database_url: str, schema: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(f'SELECT count(*) FROM "{schema}".queue_message')
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])


async def test_every_async_enqueue_path_fails_within_the_bound_and_says_why(
    database_url: str, pg_schema: str, outage: Outage
) -> None:
    backend = await PostgresBackend.connect(outage.url, schema=pg_schema, publish_timeout=BOUND)
    try:
        producer = await Producer.create(DownQueues, backend)
        await producer.enqueue(Note(n=0))
        await outage.cut()
        # the first enqueue may find the kept connection broken and fail at once
        await fails_in_time(lambda: producer.enqueue(Note(n=1)))
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: producer.enqueue(Note(n=2)),
            lambda: producer.enqueue_after(Note(n=3), "1m"),
            lambda: producer.enqueue_many([Note(n=4), Note(n=5)]),  # COPY
            lambda: producer.enqueue_many([Note(n=6)], delay="1m"),
            lambda: producer.enqueue(OneNote(n=7)),  # INSERT … ON CONFLICT
        ]
        for call in calls:
            message, took = await fails_in_time(call)
            says_unreachable(message)
            assert took >= BOUND * 0.9, f"gave up after {took:.2f}s, before the bound"
        await outage.restore()
        await eventually(lambda: producer.enqueue(Note(n=8)))
    finally:
        await backend.close()
    assert await count(database_url, pg_schema) == 2  # n=0 and n=8: nothing half-written


async def test_the_sync_producer_fails_within_the_bound(
    database_url: str, pg_schema: str, outage: Outage
) -> None:
    backend = SyncPostgresBackend(outage.url, schema=pg_schema, publish_timeout=BOUND)
    await asyncio.to_thread(backend.open)  # the proxy runs on this loop: never block it
    try:
        producer = SyncProducer.create(DownQueues, backend)
        await asyncio.to_thread(producer.enqueue, Note(n=0))
        await outage.cut()
        await asyncio.sleep(0.2)
        await fails_in_time(lambda: asyncio.to_thread(producer.enqueue, Note(n=1)))
        message, _ = await fails_in_time(
            lambda: asyncio.to_thread(producer.enqueue_many, [Note(n=2), Note(n=3)])
        )
        says_unreachable(message)
        await outage.restore()
        await eventually(lambda: asyncio.to_thread(producer.enqueue, Note(n=4)))
    finally:
        await asyncio.to_thread(backend.close)
    assert await count(database_url, pg_schema) == 2


async def test_the_http_endpoint_answers_503_with_retry_after(
    database_url: str, pg_schema: str, outage: Outage
) -> None:
    config = QueuesConfig(subscribe={"order.paid": ["fulfil"]})
    backend = await PostgresBackend.connect(outage.url, schema=pg_schema, publish_timeout=BOUND)
    publisher = TopicPublisher(config, backend)
    app = publish_app(http_config(), publisher, AccessPolicy.parse("public"))
    try:
        async with client(app) as http:
            assert (await http.post("/queues/order.paid", json={})).status_code == 202
            await outage.cut()
            await asyncio.sleep(2.5)  # the kept connection is checked, found cut
            started = time.monotonic()
            down = await http.post("/queues/order.paid", json={"n": 1})
            took = time.monotonic() - started
            await outage.restore()
            up = await eventually(lambda: accepted(http))
    finally:
        await backend.close()
    assert down.status_code == 503, down.text
    assert down.headers["Retry-After"] == "5"
    assert "unreachable" in down.json()["error"]
    assert took < BOUND + SLACK
    assert up.status_code == 202
    assert await count(database_url, pg_schema) == 2


async def accepted(http: httpx.AsyncClient) -> httpx.Response:
    response = await http.post("/queues/order.paid", json={"n": 2})
    if response.status_code == 503:
        raise BackendUnavailableError("still 503")
    return response


async def test_ready_says_the_database_is_unreachable(
    database_url: str, pg_schema: str, outage: Outage
) -> None:
    backend = await PostgresBackend.connect(outage.url, schema=pg_schema, poll_interval="200ms")
    worker = Worker(DownQueues, backend, close_backend_on_shutdown=True)

    @worker.handler(Note)
    async def note(job: Note, ctx: JobContext) -> None:
        return None

    async with HealthServer(worker, host="127.0.0.1", port=0) as server:
        ready = f"http://127.0.0.1:{server.port}/ready"
        task = asyncio.create_task(worker.run())
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                await until_status(http, ready, 200)
                await outage.cut()
                down = await until_status(http, ready, 503)
                await outage.restore()
                await until_status(http, ready, 200, timeout=60)
        finally:
            worker.shutdown()
            await task
    assert down.text == "not ready: the postgresql backend is unreachable\n"


async def until_status(
    http: httpx.AsyncClient, url: str, status: int, timeout: float = 30.0
) -> httpx.Response:
    async with asyncio.timeout(timeout):
        while (response := await http.get(url)).status_code != status:
            await asyncio.sleep(0.1)
    return response


async def test_a_full_pool_whose_connections_stay_busy_says_so(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(
        database_url, schema=pg_schema, pool_size=1, publish_timeout=BOUND
    ) as backend:
        producer = await Producer.create(DownQueues, backend)
        async with backend._store.transaction():  # the pool's only connection, held
            message, _ = await fails_in_time(lambda: producer.enqueue(Note(n=1)))
        await producer.enqueue(Note(n=2))  # free again
    server = f"{urlsplit(database_url).hostname}:{urlsplit(database_url).port or 5432}"
    assert message == (
        f"PostgreSQL at {server}: every connection of the pool (1) stayed busy for 1s "
        "(publish_timeout); nothing was written"
    )
    assert await count(database_url, pg_schema) == 1
