"""The endpoint over ``TopicPublisher`` on a real PostgreSQL: one row per subscriber with the
caller as ``published_by``, nothing recorded on a refusal, and a failed insert is a 500 with no
row half-written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from queuey.backends.base import Backend
from queuey.cli._app import connect_backend
from queuey.http import AccessPolicy, publish_app
from queuey.topics import QueuesConfig, TopicPublisher
from tests.unit.http.http_fakes import bearer, client, http_config, token

pytestmark = pytest.mark.postgres

SHOP = {"order.paid": ["fulfil_order", "notify_ops"]}
OPS = bearer(token(sub="olga", roles=["ops"]))
MEMBER = bearer(token(sub="mo", roles=["member"]))


@pytest.fixture
async def backend(database_url: str, pg_schema: str) -> AsyncIterator[Backend]:
    opened = await connect_backend(
        QueuesConfig(subscribe=SHOP), database_url, schema=pg_schema, migrate=False
    )
    yield opened
    await opened.close()


async def rows(database_url: str, schema: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(
            f"SELECT queue, job_type, status, published_by, payload "
            f'FROM "{schema}".queue_message ORDER BY seq'
        )
        return await cursor.fetchall()


def endpoint(backend: Backend, publish: str) -> Any:
    publisher = TopicPublisher(QueuesConfig(subscribe=SHOP), backend)
    return publish_app(http_config(), publisher, AccessPolicy.parse(publish))


async def test_the_done_when_matrix(backend: Backend, database_url: str, pg_schema: str) -> None:
    async with client(endpoint(backend, "role:ops")) as http:
        ops = await http.post("/queues/order.paid", json={"order": 42}, headers=OPS)
        member = await http.post("/queues/order.paid", json={"order": 42}, headers=MEMBER)
        anonymous = await http.post("/queues/order.paid", json={"order": 42})
    async with client(endpoint(backend, "private")) as http:
        closed = await http.post("/queues/order.paid", json={"order": 42}, headers=OPS)
    assert [r.status_code for r in (ops, member, anonymous, closed)] == [202, 403, 401, 404]
    assert ops.json()["delivered"] == 2
    assert await rows(database_url, pg_schema) == [
        ("order.paid", "fulfil_order", "pending", "olga", {"order": 42}),
        ("order.paid", "notify_ops", "pending", "olga", {"order": 42}),
    ]


async def test_anonymous_public_publish_and_the_orphan_row(
    backend: Backend, database_url: str, pg_schema: str
) -> None:
    async with client(endpoint(backend, "public")) as http:
        response = await http.post("/queues/nobody.listens", content=b'{"a": "\\u0000"}')
    assert (response.status_code, response.json()["delivered"]) == (202, 0)
    assert await rows(database_url, pg_schema) == [
        ("nobody.listens", "", "done", "", {"a": "\x00"}),
    ]


async def test_a_failed_insert_is_500_and_writes_no_row(
    backend: Backend, database_url: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            f'CREATE FUNCTION "{pg_schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS '
            "$$ BEGIN RAISE EXCEPTION 'disk full'; END $$"
        )
        await conn.execute(
            f'CREATE TRIGGER refuse BEFORE INSERT ON "{pg_schema}".queue_message FOR EACH ROW '
            f"WHEN (NEW.job_type = 'notify_ops') EXECUTE FUNCTION \"{pg_schema}\".refuse()"
        )
    async with client(endpoint(backend, "role:ops")) as http:
        response = await http.post("/queues/order.paid", json={"order": 42}, headers=OPS)
    assert (response.status_code, response.json()) == (
        500,
        {"error": "the message could not be queued"},
    )
    assert "disk full" not in response.text
    assert "order.paid" in caplog.text
    assert await rows(database_url, pg_schema) == []
