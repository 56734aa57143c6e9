"""Pauses made in the dashboard stop a subscriber that follows them, on a real PostgreSQL:
nothing is claimed while its topic (or its whole app) is paused, it catches up on resume, and
what it had claimed but not started is handed back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from queuey.backends.postgres import PgDashboardStore
from queuey.cli._topics import connect_backend
from queuey.dashboard import PauseGate
from queuey.topics import App, QueuesConfig

pytestmark = pytest.mark.postgres


@pytest.fixture
async def store(database_url: str, pg_schema: str) -> AsyncIterator[PgDashboardStore]:
    async with PgDashboardStore(database_url, schema=pg_schema, topic_channel="shop_queue") as s:
        yield s


async def statuses(database_url: str, schema: str) -> list[tuple[str, Any]]:
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
async def test_a_followed_pause_stops_claims_until_resumed(
    database_url: str, pg_schema: str, store: PgDashboardStore, kind: str, queue: str
) -> None:
    config = QueuesConfig(prefix="shop", subscribe={"order.paid": "fulfil"}, poll_secs=1)
    app = App(config)
    handled: list[Any] = []
    app.register("fulfil", handled.append)
    backend = await connect_backend(config, database_url, schema=pg_schema)
    gate = PauseGate("shop")

    subscriber = app.subscriber(backend, gate=gate)
    running = asyncio.create_task(subscriber.run())
    following = asyncio.create_task(gate.follow(store.paused_keys, every=0.1))
    try:
        await app.publisher(backend).publish("order.paid", {"n": 1})
        await wait_for(lambda: _done(handled, 1))
        await store.pause("tester", kind, queue)
        await wait_for(lambda: _true(gate.is_paused("topic", "order.paid")))
        await app.publisher(backend).publish("order.paid", {"n": 2})
        await asyncio.sleep(1.5)  # more than a poll: a claim would have happened by now
        assert [s for s, _ in await statuses(database_url, pg_schema)] == ["done", "pending"]
        assert (await statuses(database_url, pg_schema))[1][1] is None  # never claimed
        await store.resume("tester", kind, queue)
        await wait_for(lambda: _done(handled, 2))
    finally:
        subscriber.shutdown()
        await running
        following.cancel()
        await backend.close()
    assert handled == [{"n": 1}, {"n": 2}]


async def test_a_pause_hands_back_what_was_claimed_but_not_started() -> None:
    from queuey.backends.memory import MemoryBackend
    from queuey.envelope import Envelope
    from queuey.queues import QueueConfig

    backend = MemoryBackend()
    queue = QueueConfig(name="emails", prefetch=10)
    await backend.declare([queue])
    await backend.publish([Envelope.new("Send", "emails", {"n": n}) for n in range(3)])
    gate = PauseGate()
    consumer = gate.consumer(backend, queue)
    first = await consumer.next()
    assert first is not None
    gate.set([("job", "emails")])
    pulled = asyncio.create_task(consumer.next())
    await asyncio.sleep(0.05)
    assert not pulled.done()  # parked while paused
    assert await backend.count_pending("emails") == 2  # the prefetched ones were handed back
    gate.set([])
    again = await asyncio.wait_for(pulled, 2)
    assert again is not None
    await consumer.stop()


async def _done(handled: list[Any], count: int) -> bool:
    return len(handled) >= count


async def _true(value: bool) -> bool:
    return value
