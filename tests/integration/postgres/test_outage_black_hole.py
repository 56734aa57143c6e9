"""A database that stops answering on open connections (a network partition, a frozen server:
packets swallowed, nothing reset) still bounds every enqueue by ``publish_timeout``: it fails
with a ``BackendUnavailableError`` saying the database did not answer and that the job may or
may not have been written, the connection is dropped, and once the network forwards again the
next enqueues succeed. Through a TCP proxy in black-hole mode (``tests.tcp_proxy``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import pytest

from queuey import BackendUnavailableError, Producer
from queuey.backends.postgres import PostgresBackend
from tests.integration.postgres.test_outage_enqueue import (
    BOUND,
    SLACK,
    DownQueues,
    Note,
    OneNote,
    count,
    eventually,
)
from tests.tcp_proxy import Proxy, through

pytestmark = pytest.mark.postgres


@pytest.fixture
async def proxy(database_url: str) -> AsyncIterator[Proxy]:
    parts = urlsplit(database_url)
    proxy = Proxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.cut()


async def unanswered(call: Callable[[], Awaitable[Any]]) -> str:
    """The message of the ``BackendUnavailableError`` ``call`` raised within the bound."""
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError) as caught:
        await call()
    took = time.monotonic() - started
    assert BOUND * 0.9 <= took < BOUND + SLACK, f"took {took:.1f}s: {caught.value}"
    return str(caught.value)


async def test_an_enqueue_the_database_does_not_answer_fails_within_the_bound(
    database_url: str, pg_schema: str, proxy: Proxy
) -> None:
    url = through(database_url, proxy.port)
    backend = await PostgresBackend.connect(url, schema=pg_schema, publish_timeout=BOUND)
    try:
        producer = await Producer.create(DownQueues, backend)
        await producer.enqueue(Note(n=0))  # the publishing connection is open and kept
        proxy.black_hole()
        message = await unanswered(lambda: producer.enqueue(Note(n=1)))
        assert "did not answer within 1s (publish_timeout)" in message, message
        assert "may or may not have been written" in message, message
        assert "idempotency key" in message, message
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: producer.enqueue(Note(n=2)),
            lambda: producer.enqueue_many([Note(n=3), Note(n=4)]),  # COPY
            lambda: producer.enqueue_many([Note(n=5)], delay="1m"),
            lambda: producer.enqueue(OneNote(n=6)),  # INSERT … ON CONFLICT
        ]
        for call in calls:
            await unanswered(call)
        proxy.forward()
        await eventually(lambda: producer.enqueue(Note(n=7)))
        for n in range(8, 12):  # no connection the black hole left out of step is lent
            await producer.enqueue(Note(n=n))
    finally:
        await backend.close()
    # n=0 and n=7..11, and maybe some of those the database did not answer: the proxy delivers
    # what it held once it forwards again, as a healed network does (at-least-once)
    assert 6 <= await count(database_url, pg_schema) <= 12


async def test_a_large_batch_gets_more_time_than_a_single_enqueue(
    database_url: str, pg_schema: str, proxy: Proxy
) -> None:
    url = through(database_url, proxy.port)
    backend = await PostgresBackend.connect(url, schema=pg_schema, publish_timeout=BOUND)
    try:
        producer = await Producer.create(DownQueues, backend)
        await producer.enqueue(Note(n=0))
        # 3,000 rows may wait 1 s + 3 s for the answer: a 2 s pause does not cut them short
        proxy.black_hole()
        batch = asyncio.create_task(producer.enqueue_many([Note(n=n) for n in range(3000)]))
        await asyncio.sleep(BOUND * 2)
        proxy.forward()
        await batch
    finally:
        await backend.close()
    assert await count(database_url, pg_schema) == 3001
