"""The bulk publish through ``COPY``: what it writes must be what the statement writes (every
character of a payload, header or name kept), in the caller's transaction when given one, and
rows the server must compute (a delay, a message TTL, a topic nobody subscribes to) still go
through the statement."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from pydantic import Field

from queuey import Envelope, Job, Producer, Queue, QueueSet
from queuey.backends.postgres import PostgresBackend
from queuey.backends.postgres._publish import bulk_params, copy_rows

pytestmark = pytest.mark.postgres


class CopyQueues(QueueSet, prefix="copy"):
    plain = Queue(prefetch=8)
    short = Queue(prefetch=8, message_ttl="1h")


class Text(Job[CopyQueues], queue=CopyQueues.plain, name="copy.Text"):
    body: str = ""
    items: list[Any] = Field(default_factory=list)


TRICKY = [
    "back\\slash",
    'a "quoted" word',
    "tab\there",
    "new\nline\r\nand CR",
    "\\N",  # COPY's NULL marker, as text
    "\u0000 nul (kept in JSON; text columns refuse it on every path)",
    "éàü — ☃ 😀",
    "\\\\t",
    "line\u2028separator \u007f del \u00a0 nbsp \ufeff bom",
]


async def stored(url: str, schema: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            sql.SQL(
                "SELECT id::text, kind, queue, job_type, status, priority, attempts, deferrals,"
                " payload::text, headers::text, published_by, enqueued_at_ms,"
                " available_at <= now(), expires_at IS NULL FROM {} ORDER BY seq"
            ).format(sql.Identifier(schema, "queue_message"))
        )
        return await cursor.fetchall()


async def test_copy_keeps_every_character_the_statement_keeps(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    envelopes = [
        Envelope.new(
            f"copy.{name}",
            "copy.plain",
            {"body": text, "list": [text, 1.5, None, True]},
            priority=n % 3,
            headers={"trace": text, "published_by": text.replace("\u0000", "")},
        )
        for n, (name, text) in enumerate(
            (name, text) for name in ("T\\t", "T\tab", "T\nn") for text in TRICKY
        )
    ]
    assert copy_rows(envelopes, 0.0, lambda kind, queue: None) is not None
    await backend.publish(envelopes)
    through_copy = await stored(database_url, pg_schema)
    await purge(database_url, pg_schema)
    params = bulk_params(envelopes, 0.0, lambda kind, queue: None, backend.channel)
    await backend._store.publish("publish", params)  # the statement, for the same envelopes
    through_statement = await stored(database_url, pg_schema)
    assert through_copy == through_statement
    assert [row[3] for row in through_copy] == [e.job_type for e in envelopes]


async def purge(url: str, schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, "queue_message"))
        )


async def test_enqueue_many_round_trips_tricky_payloads(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(CopyQueues, backend)
    jobs = [Text(body=text, items=[text, {text: text}]) for text in TRICKY]
    ids = await producer.enqueue_many(jobs)
    rows = await stored(database_url, pg_schema)
    assert [row[0] for row in rows] == list(ids)
    assert [Text.model_validate_json(row[8]) for row in rows] == jobs
    assert {row[4] for row in rows} == {"pending"} and all(row[12] and row[13] for row in rows)


async def test_copy_joins_a_callers_non_autocommit_transaction(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(CopyQueues, backend)
    async with await psycopg.AsyncConnection.connect(database_url) as own:
        await producer.enqueue_many([Text(body="a"), Text(body="b")], connection=own)
        await own.rollback()
        await producer.enqueue_many([Text(body="c"), Text(body="d")], connection=own)
        assert await stored(database_url, pg_schema) == []  # not committed yet
        await own.commit()
    rows = await stored(database_url, pg_schema)
    assert [Text.model_validate_json(row[8]).body for row in rows] == ["c", "d"]


async def test_copy_joins_a_callers_autocommit_transaction_block(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(CopyQueues, backend)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as own:
        with pytest.raises(RuntimeError):
            async with own.transaction():
                await producer.enqueue_many([Text(body="a"), Text(body="b")], connection=own)
                raise RuntimeError("the caller's transaction fails")
        assert await stored(database_url, pg_schema) == []
        await producer.enqueue_many([Text(body="c"), Text(body="d")], connection=own)
    assert len(await stored(database_url, pg_schema)) == 2  # outside a block: committed


async def test_rows_the_server_computes_still_go_through_the_statement(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    def no_ttl(kind: Any, queue: str) -> float | None:
        return None

    two = [Envelope.new("copy.Text", "copy.plain", {}) for _ in range(2)]
    assert copy_rows(two, 5.0, no_ttl) is None
    assert copy_rows(two, 0.0, lambda kind, queue: 60.0) is None
    nobody = [Envelope.new("", "t", {}, kind="topic") for _ in range(2)]
    assert copy_rows(nobody, 0.0, no_ttl) is None
    producer = await Producer.create(CopyQueues, backend)
    await producer.enqueue_many([Text(), Text()], delay=timedelta(hours=1))
    await producer.enqueue_many([Short(), Short()])
    rows = await stored(database_url, pg_schema)
    assert [(row[12], row[13]) for row in rows] == [(False, True)] * 2 + [(True, False)] * 2


class Short(Job[CopyQueues], queue=CopyQueues.short, name="copy.Short"):
    pass
