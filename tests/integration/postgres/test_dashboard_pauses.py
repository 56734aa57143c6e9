"""Pauses made in the dashboard stop a subscriber's claims on a real PostgreSQL, with no
wrapper around the backend: a pause is the queue's limit zero, answered by the claim itself
(nothing is claimed while the topic, or its whole app, is paused), and a resume wakes the
subscriber at once (a notification, long before its poll). On the memory backend a pause is the
same limit zero: nothing is handed out while paused, everything waits, untouched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from queuey.backends.postgres import PgDashboardStore
from queuey.cli._app import connect_backend
from queuey.topics import App, QueuesConfig

pytestmark = pytest.mark.postgres


@pytest.fixture
async def store(database_url: str, pg_schema: str) -> AsyncIterator[PgDashboardStore]:
    async with PgDashboardStore(database_url, schema=pg_schema, topic_channel="shop_queue") as s:
        yield s


async def statuses(database_url: str, schema: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(
            f'SELECT status, claimed_at FROM "{schema}".queue_message ORDER BY seq'
        )
        return await cursor.fetchall()


async def wait_for(check: Any, timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.05)


@pytest.mark.parametrize(("kind", "queue"), [("topic", "order.paid"), ("app", "shop")])
async def test_a_pause_stops_claims_until_resumed(
    database_url: str, pg_schema: str, store: PgDashboardStore, kind: str, queue: str
) -> None:
    # A 30 s poll: only the resume's notification can wake the subscriber in time.
    config = QueuesConfig(prefix="shop", subscribe={"order.paid": "fulfil"}, poll_secs=30)
    app = App(config)
    handled: list[Any] = []
    app.register("fulfil", handled.append)
    backend = await connect_backend(config, database_url, schema=pg_schema)
    subscriber = app.subscriber(backend)
    running = asyncio.create_task(subscriber.run())
    try:
        await app.publisher(backend).publish("order.paid", {"n": 1})
        await wait_for(lambda: _done(handled, 1))
        await store.pause("tester", kind, queue)
        await app.publisher(backend).publish("order.paid", {"n": 2})  # its notification wakes
        await asyncio.sleep(1.5)  # the subscriber: its claim found the queue paused
        assert [s for s, _ in await statuses(database_url, pg_schema)] == ["done", "pending"]
        assert (await statuses(database_url, pg_schema))[1][1] is None  # never claimed
        await store.resume("tester", kind, queue)
        await wait_for(lambda: _done(handled, 2), timeout=10)
    finally:
        subscriber.shutdown()
        await running
        await backend.close()
    assert handled == [{"n": 1}, {"n": 2}]


async def test_a_paused_memory_queue_hands_nothing_out_until_resumed() -> None:
    from queuey.backends.memory import MemoryBackend
    from queuey.envelope import Envelope
    from queuey.queues import QueueConfig

    backend = MemoryBackend()
    queue, other = QueueConfig(name="emails", prefetch=10), QueueConfig(name="sms")
    await backend.declare([queue, other])
    await backend.publish([Envelope.new("Send", "emails", {"n": n}) for n in range(3)])
    await backend.publish([Envelope.new("Text", "sms", {})])
    consumer = backend.consumer(queue)
    first = await consumer.next()
    assert first is not None
    assert await backend.pause_queue("emails") is True
    assert await backend.pause_queue("emails") is False  # already paused
    pulled = asyncio.create_task(consumer.next())
    await asyncio.sleep(0.05)
    assert not pulled.done()  # parked while paused
    assert await backend.count_pending("emails") == 2  # the rest wait, untouched
    sms = backend.consumer(other)
    assert await asyncio.wait_for(sms.next(), 2) is not None  # another queue runs on
    assert await backend.resume_queue("emails") is True
    again = await asyncio.wait_for(pulled, 2)
    assert again is not None and again.envelope.payload == {"n": 1}
    await consumer.stop()
    await sms.stop()


async def _done(handled: list[Any], count: int) -> bool:
    return len(handled) >= count
