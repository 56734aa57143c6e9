"""Topics on a real PostgreSQL: rows per subscriber, the orphan row, the caller's transaction,
retries recorded in the table, NOTIFY-fast delivery and the paused app."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest

from queuey.backends.base import Backend
from queuey.backends.postgres import PostgresBackend
from queuey.cli._app import connect_backend
from queuey.errors import BackendError
from queuey.topics import App, InvalidTopicError, MessageContext, QueuesConfig, Subscriber

pytestmark = pytest.mark.postgres

SHOP = {"user.signed_up": "send_welcome", "order.paid": ["fulfil_order", "notify_ops"]}


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
        yield c


async def rows(
    conn: psycopg.AsyncConnection[Any], schema: str, topic: str
) -> list[tuple[Any, ...]]:
    cursor = await conn.execute(
        f"SELECT kind, job_type, status, attempts, published_by, payload, error, id::text "
        f'FROM "{schema}".queue_message WHERE queue = %s ORDER BY seq',
        [topic],
    )
    return await cursor.fetchall()


async def open_backend(database_url: str, schema: str, config: QueuesConfig) -> Backend:
    return await connect_backend(config, database_url, schema=schema, migrate=False)


async def run_until(subscriber: Subscriber, done: Callable[[], Any], timeout: float = 15) -> None:
    task = asyncio.create_task(subscriber.run())
    try:
        async with asyncio.timeout(timeout):
            while not await done():
                assert not task.done(), task.exception() if task.done() else None
                await asyncio.sleep(0.02)
    finally:
        subscriber.shutdown()
        await task


async def test_connect_backend_uses_the_queues_settings(database_url: str, pg_schema: str) -> None:
    config = QueuesConfig(
        prefix="shop", poll_secs=7, lease_secs=90, retain_hours=0, publish_timeout_secs=2
    )
    backend = await open_backend(database_url, pg_schema, config)
    try:
        assert isinstance(backend, PostgresBackend)
        assert (backend.channel, backend.poll_interval, backend.lease) == ("shop_queue", 7, 90)
        assert backend.publish_timeout == 2
        assert backend.retain is None
    finally:
        await backend.close()
    kept = await open_backend(database_url, pg_schema, QueuesConfig(retain_hours=2))
    assert isinstance(kept, PostgresBackend) and kept.retain == 7200
    await kept.close()


async def test_a_publish_writes_one_row_per_subscriber(
    database_url: str, pg_schema: str, conn: psycopg.AsyncConnection[Any]
) -> None:
    config = QueuesConfig(subscribe=SHOP)
    backend = await open_backend(database_url, pg_schema, config)
    try:
        publication = (
            await App(config).publisher(backend).publish(" order.paid ", {"order": 7}, "user-1")
        )
    finally:
        await backend.close()
    found = await rows(conn, pg_schema, "order.paid")
    assert [r[:6] for r in found] == [
        ("topic", "fulfil_order", "pending", 0, "user-1", {"order": 7}),
        ("topic", "notify_ops", "pending", 0, "user-1", {"order": 7}),
    ]
    assert publication.id == found[0][7]
    assert (publication.topic, publication.delivered) == ("order.paid", 2)


async def test_a_topic_nobody_subscribes_to_leaves_one_done_row(
    database_url: str, pg_schema: str, conn: psycopg.AsyncConnection[Any]
) -> None:
    config = QueuesConfig(subscribe=SHOP)
    backend = await open_backend(database_url, pg_schema, config)
    try:
        publication = await App(config).publisher(backend).publish("nobody.listens", {"x": 1})
    finally:
        await backend.close()
    ((kind, job_type, status, _, _, payload, _, row_id),) = await rows(
        conn, pg_schema, "nobody.listens"
    )
    assert (kind, job_type, status, payload, row_id) == (
        "topic",
        "",
        "done",
        {"x": 1},
        publication.id,
    )
    assert publication.delivered == 0


async def test_an_invalid_topic_writes_no_row(
    database_url: str, pg_schema: str, conn: psycopg.AsyncConnection[Any]
) -> None:
    backend = await open_backend(database_url, pg_schema, QueuesConfig(subscribe=SHOP))
    try:
        with pytest.raises(InvalidTopicError):
            await App(QueuesConfig(subscribe=SHOP)).publisher(backend).publish("order paid", {})
    finally:
        await backend.close()
    cursor = await conn.execute(f'SELECT count(*) FROM "{pg_schema}".queue_message')
    assert (await cursor.fetchone()) == (0,)


async def test_a_publish_joins_the_callers_transaction(
    database_url: str, pg_schema: str, conn: psycopg.AsyncConnection[Any]
) -> None:
    config = QueuesConfig(subscribe=SHOP)
    backend = await open_backend(database_url, pg_schema, config)
    publisher = App(config).publisher(backend)
    try:
        async with await psycopg.AsyncConnection.connect(database_url) as own:
            await publisher.publish("order.paid", {"n": 1}, connection=own)
            await own.rollback()
            await publisher.publish("order.paid", {"n": 2}, connection=own)
            assert await rows(conn, pg_schema, "order.paid") == []  # not committed yet
            await own.commit()
    finally:
        await backend.close()
    assert [r[5] for r in await rows(conn, pg_schema, "order.paid")] == [{"n": 2}, {"n": 2}]


async def test_a_closed_connection_fails_the_whole_fan_out(
    database_url: str, pg_schema: str, conn: psycopg.AsyncConnection[Any]
) -> None:
    config = QueuesConfig(subscribe=SHOP)
    backend = await open_backend(database_url, pg_schema, config)
    try:
        own = await psycopg.AsyncConnection.connect(database_url)
        await own.close()
        with pytest.raises(BackendError):
            await App(config).publisher(backend).publish("order.paid", {}, connection=own)
    finally:
        await backend.close()
    assert await rows(conn, pg_schema, "order.paid") == []


async def test_a_failing_subscriber_retries_alone_and_ends_failed(
    database_url: str, pg_schema: str, conn: psycopg.AsyncConnection[Any]
) -> None:
    config = QueuesConfig(max_attempts=2, retry_backoff_secs=0, subscribe=SHOP)
    app = App(config)
    runs: list[tuple[str, int]] = []

    @app.function
    def fulfil_order(payload: Any, context: MessageContext) -> None:
        runs.append(("fulfil_order", context.attempts))

    @app.function
    async def notify_ops(payload: Any, context: MessageContext) -> None:
        runs.append(("notify_ops", context.attempts))
        raise ConnectionError("pager down")

    backend = await open_backend(database_url, pg_schema, config)
    try:
        await app.publisher(backend).publish("order.paid", {"order": 1})

        async def settled() -> bool:
            return {r[2] for r in await rows(conn, pg_schema, "order.paid")} <= {"done", "failed"}

        await run_until(app.subscriber(backend), settled)
    finally:
        await backend.close()
    assert runs.count(("fulfil_order", 1)) == 1 and len(runs) == 3
    found = {r[1]: r for r in await rows(conn, pg_schema, "order.paid")}
    assert found["fulfil_order"][2:4] == ("done", 1)
    assert found["notify_ops"][2:4] == ("failed", 2)
    assert found["notify_ops"][6] == "ConnectionError: pager down"


async def test_a_failure_is_retried_after_the_backoff(
    database_url: str, pg_schema: str, conn: psycopg.AsyncConnection[Any]
) -> None:
    config = QueuesConfig(subscribe={"t": "flaky"})  # retry_backoff_secs = 10
    app = App(config)
    app.register("flaky", lambda payload: 1 / 0)
    backend = await open_backend(database_url, pg_schema, config)
    try:
        await app.publisher(backend).publish("t", {})

        async def failed_once() -> bool:
            found = await rows(conn, pg_schema, "t")
            return bool(found[0][2] == "pending" and found[0][3] == 1)

        await run_until(app.subscriber(backend), failed_once)
    finally:
        await backend.close()
    cursor = await conn.execute(
        f"SELECT extract(epoch FROM available_at - now()), error "
        f'FROM "{pg_schema}".queue_message WHERE queue = %s',
        ["t"],
    )
    row = await cursor.fetchone()
    assert row is not None
    due_in, error = row
    assert 7 < float(due_in) <= 10
    assert error == "ZeroDivisionError: division by zero"


async def test_a_function_not_loaded_fails_its_messages_with_the_reason(
    database_url: str, pg_schema: str, conn: psycopg.AsyncConnection[Any]
) -> None:
    config = QueuesConfig(max_attempts=2, retry_backoff_secs=0, subscribe={"t": "ghost"})
    app = App(config)
    backend = await open_backend(database_url, pg_schema, config)
    try:
        await app.publisher(backend).publish("t", {})

        async def failed() -> bool:
            return bool((await rows(conn, pg_schema, "t"))[0][2] == "failed")

        await run_until(app.subscriber(backend), failed)
    finally:
        await backend.close()
    ((_, _, _, attempts, _, _, error, _),) = await rows(conn, pg_schema, "t")
    assert attempts == 2
    assert error == "`ghost` is subscribed to `t` but no such function is loaded"


async def test_a_publish_reaches_every_subscriber_in_milliseconds_not_on_the_poll(
    database_url: str, pg_schema: str
) -> None:
    config = QueuesConfig(prefix="fast", poll_secs=30, subscribe=SHOP)
    app = App(config)
    arrived: dict[str, float] = {}

    async def record(payload: Any, context: MessageContext) -> None:
        arrived[context.subscriber] = time.monotonic()

    for name in ("send_welcome", "fulfil_order", "notify_ops"):
        app.register(name, record)
    backend = await open_backend(database_url, pg_schema, config)
    publisher_backend = await open_backend(database_url, pg_schema, config)
    subscriber = app.subscriber(backend)
    task = asyncio.create_task(subscriber.run())
    try:
        await asyncio.sleep(1.0)  # the listener is up and the first sweep has run
        sent = time.monotonic()
        await app.publisher(publisher_backend).publish("order.paid", {})
        await app.publisher(publisher_backend).publish("user.signed_up", {})
        async with asyncio.timeout(5):
            while len(arrived) < 3:
                await asyncio.sleep(0.005)
    finally:
        subscriber.shutdown()
        await task
        await backend.close()
        await publisher_backend.close()
    assert max(arrived.values()) - sent < 1.0


async def test_a_disabled_app_records_and_waits_until_resumed(
    database_url: str, pg_schema: str, conn: psycopg.AsyncConnection[Any]
) -> None:
    config = QueuesConfig(enabled=False, poll_secs=1, subscribe={"t": "f"})
    app = App(config)
    handled: list[Any] = []
    app.register("f", handled.append)
    backend = await open_backend(database_url, pg_schema, config)
    subscriber = app.subscriber(backend)
    task = asyncio.create_task(subscriber.run())
    try:
        await app.publisher(backend).publish("t", 1)
        await asyncio.sleep(1.5)
        assert handled == []
        assert [r[2] for r in await rows(conn, pg_schema, "t")] == ["pending"]
        subscriber.resume()
        async with asyncio.timeout(10):
            while (await rows(conn, pg_schema, "t"))[0][2] != "done":
                await asyncio.sleep(0.02)
    finally:
        subscriber.shutdown()
        await task
        await backend.close()
    assert handled == [1]


@pytest.mark.timeout(30)
async def test_pausing_a_running_subscriber_leaves_new_rows_pending(
    database_url: str, pg_schema: str, conn: psycopg.AsyncConnection[Any]
) -> None:
    config = QueuesConfig(poll_secs=1, subscribe={"t": "f"})
    app = App(config)
    handled: list[Any] = []
    app.register("f", handled.append)
    backend = await open_backend(database_url, pg_schema, config)
    subscriber = app.subscriber(backend)
    task = asyncio.create_task(subscriber.run())
    try:
        await asyncio.sleep(0.5)
        subscriber.pause()
        await app.publisher(backend).publish("t", 1)
        await asyncio.sleep(2.5)  # two polls and a NOTIFY: nothing is claimed
        assert handled == []
        assert [r[2:4] for r in await rows(conn, pg_schema, "t")] == [("pending", 0)]
        subscriber.resume()
        async with asyncio.timeout(10):
            while (await rows(conn, pg_schema, "t"))[0][2] != "done":
                await asyncio.sleep(0.02)
    finally:
        subscriber.shutdown()
        await task
        await backend.close()
    assert handled == [1]


async def test_apps_sharing_a_table_take_only_their_own_subscribers(
    database_url: str, pg_schema: str, conn: psycopg.AsyncConnection[Any]
) -> None:
    first = App(QueuesConfig(prefix="appx", subscribe={"t.shared": "record"}, poll_secs=1))
    second = App(QueuesConfig(prefix="appy", subscribe={"t.shared": "boom"}, poll_secs=1))
    seen: list[str] = []

    @first.function
    def record(payload: Any) -> None:
        seen.append("record")

    @second.function
    def boom(payload: Any) -> None:
        seen.append("boom")

    backends = [await open_backend(database_url, pg_schema, app.config) for app in (first, second)]
    try:
        await first.publisher(backends[0]).publish("t.shared", {})
        await second.publisher(backends[1]).publish("t.shared", {})

        async def done() -> bool:
            found = await rows(conn, pg_schema, "t.shared")
            return sorted(seen) == ["boom", "record"] and {r[2] for r in found} == {"done"}

        subscribers = [second.subscriber(backends[1]), first.subscriber(backends[0])]
        tasks = [asyncio.create_task(s.run()) for s in subscribers]
        try:
            async with asyncio.timeout(15):
                while not await done():
                    await asyncio.sleep(0.05)
        finally:
            for subscriber in subscribers:
                subscriber.shutdown()
            await asyncio.gather(*tasks)
    finally:
        for backend in backends:
            await backend.close()
    assert [(r[1], r[2], r[6]) for r in await rows(conn, pg_schema, "t.shared")] == [
        ("record", "done", None),
        ("boom", "done", None),
    ]
