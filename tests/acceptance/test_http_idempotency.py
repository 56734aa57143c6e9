"""The ``Idempotency-Key`` header on a real PostgreSQL: the same key and body answer 200 with
the first publication and write nothing; another body is 409; after the window a key is new
again (202); concurrent first uses write one publication."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from queuey.backends.base import Backend
from queuey.cli._app import connect_backend
from queuey.http import AccessPolicy, publish_app
from queuey.topics import QueuesConfig, TopicPublisher
from tests.unit.http.http_fakes import client, http_config

pytestmark = pytest.mark.postgres

SHOP = QueuesConfig(subscribe={"order.paid": ["fulfil_order", "notify_ops"]})


@pytest.fixture
async def backend(database_url: str, pg_schema: str) -> AsyncIterator[Backend]:
    opened = await connect_backend(SHOP, database_url, schema=pg_schema, migrate=False)
    yield opened
    await opened.close()


async def sql(database_url: str, query: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(query)
        return await cursor.fetchall() if cursor.description else []


def endpoint(backend: Backend) -> Any:
    publisher = TopicPublisher(SHOP, backend)
    return publish_app(http_config(), publisher, AccessPolicy.parse("public"))


async def test_same_key_same_body_replays_other_body_conflicts_and_the_window_ends(
    backend: Backend, database_url: str, pg_schema: str
) -> None:
    key = {"Idempotency-Key": '"8e03978e-40d5-43e8-bc93-6894a57f9324"'}
    count = f'SELECT count(*) FROM "{pg_schema}".queue_message'
    async with client(endpoint(backend)) as http:
        first = await http.post("/queues/order.paid", json={"order": 42}, headers=key)
        again = await http.post("/queues/order.paid", json={"order": 42}, headers=key)
        other = await http.post("/queues/order.paid", json={"order": 43}, headers=key)
        plain = await http.post("/queues/order.paid", json={"order": 42})
        bad = await http.post("/queues/order.paid", json={}, headers={"Idempotency-Key": ""})
        assert [r.status_code for r in (first, again, other, plain, bad)] == [
            202,
            200,
            409,
            202,
            400,
        ]
        assert again.json() == first.json() and first.json()["delivered"] == 2
        assert "another topic or body" in other.json()["error"]
        assert await sql(database_url, count) == [(4,)]  # the first publication and the plain one
        await sql(
            database_url,
            f'UPDATE "{pg_schema}".queue_message_idempotency '
            "SET created_at = now() - interval '25 hours'",
        )
        later = await http.post("/queues/order.paid", json={"order": 43}, headers=key)
        assert later.status_code == 202 and later.json()["id"] != first.json()["id"]
        assert await sql(database_url, count) == [(6,)]


async def test_concurrent_first_uses_write_one_publication(
    backend: Backend, database_url: str, pg_schema: str
) -> None:
    others = [
        await connect_backend(SHOP, database_url, schema=pg_schema, migrate=False) for _ in range(5)
    ]
    try:
        publishers = [TopicPublisher(SHOP, b) for b in others]
        found = await asyncio.gather(
            *(p.publish("order.paid", {"n": 1}, key="same") for p in publishers)
        )
    finally:
        for b in others:
            await b.close()
    assert sum(not p.replayed for p in found) == 1 and len({p.id for p in found}) == 1
    rows = await sql(database_url, f'SELECT count(*) FROM "{pg_schema}".queue_message')
    assert rows == [(2,)]
