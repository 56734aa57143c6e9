"""Claims run on connections of their own (``_claiming``): planned once, generically, never
JIT-compiled; the generic plan stays on the claim index as the table grows past the size it
was planned at; nothing else runs with those settings; a connection that failed, or broke
while kept, is never reused."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import psycopg
import pytest
from psycopg import sql

from queuey import Job, Producer, Queue, QueueSet
from queuey.backends.postgres import PostgresBackend
from queuey.backends.postgres import _pool as pool_module
from queuey.backends.postgres._claiming import ClaimConnections
from queuey.backends.postgres._store import Store
from tests.integration.postgres.plans import nodes

pytestmark = pytest.mark.postgres


class PlanQueues(QueueSet, prefix="plans"):
    work = Queue(prefetch=16)


class Step(Job[PlanQueues], queue=PlanQueues.work, name="plans.Step"):
    n: int = 0


def store_of(backend: PostgresBackend) -> Store:
    return backend._store


async def scalar_rows(conn: psycopg.AsyncConnection[Any], query: str) -> list[tuple[Any, ...]]:
    cursor = await conn.execute(query)
    return await cursor.fetchall()


async def fill(url: str, schema: str, due: int, later: int) -> None:
    """``due`` rows due now (priorities 0 and 1) and ``later`` due in an hour, then ANALYZE."""
    table = sql.Identifier(schema, "queue_message")
    insert = (
        "INSERT INTO {} (id, kind, queue, job_type, payload, priority, available_at) "
        "SELECT gen_random_uuid(), 'job', 'plans.work', 'plans.Step', '{{}}', g %% 2, "
        "now() + %s * interval '1 hour' FROM generate_series(1, %s) g"
    )
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for rows, hours in ((due, 0), (later, 1)):
            await conn.execute(sql.SQL(insert).format(table), (hours, rows))
        await conn.execute(sql.SQL("ANALYZE {}").format(table))


CLAIM_VALUES: dict[str, Any] = {
    "kind": "job",
    "queue": "plans.work",
    "app": None,
    "limit": 256,
    "owner": "test",
    "lease": 30.0,
    "job_types": None,
}
"""The claim's parameters, as a worker of ``plans.work`` sends them."""


def pages(explained: dict[str, Any]) -> int:
    """The buffers an explained statement touched."""
    root = explained["Plan"]
    return int(root["Shared Hit Blocks"] + root["Shared Read Blocks"])


async def explain_kept_claim(store: Store, limit: int) -> dict[str, Any]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of the claim prepared on the kept claim connection, with
    this queue's parameters, rolled back."""
    text = store.statements["claim"].as_string(None)
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", text)))
    values = {**CLAIM_VALUES, "limit": limit}
    async with store._where().claiming() as conn:
        prepared = await scalar_rows(
            conn, "SELECT name FROM pg_prepared_statements WHERE statement LIKE '-- queuey: claim%'"
        )
        assert len(prepared) == 1, prepared
        explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE {}({})").format(
            sql.Identifier(prepared[0][0]),
            sql.SQL(", ").join(sql.Literal(values[name]) for name in names),
        )
        async with conn.transaction(force_rollback=True):
            plan = (await (await conn.execute(explain)).fetchall())[0][0]
    return plan[0]  # type: ignore[no-any-return]


async def test_claims_reuse_one_generic_plan_without_jit(backend: PostgresBackend) -> None:
    producer = await Producer.create(PlanQueues, backend)
    await producer.enqueue_many([Step(n=n) for n in range(4)])
    store = store_of(backend)
    for _ in range(4):
        await store.claim(PlanQueues.work.config, 1)
    async with store._where().claiming() as conn:
        settings = await scalar_rows(
            conn, "SELECT current_setting('plan_cache_mode'), current_setting('jit')"
        )
        plans = await scalar_rows(
            conn,
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE '-- queuey: claim%'",
        )
    assert settings == [("force_generic_plan", "off")]
    assert plans == [(4, 0)]  # planned once, at the first claim, for every later one
    async with store._where().connection() as conn:  # everything else: PostgreSQL's defaults
        other = await scalar_rows(
            conn, "SELECT current_setting('plan_cache_mode'), current_setting('jit')"
        )
    assert other[0][0] == "auto" and other != settings


async def test_a_generic_claim_plan_made_on_an_empty_table_stays_on_the_claim_index(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    """The plan is made at the first claim, while the table is empty; 20,000 due rows and
    50,000 due later arrive afterwards. A full claim and a short one still read the claim
    index in order, one bounded range per priority, and find each row by primary key."""
    store = store_of(backend)
    assert (await store.claim(PlanQueues.work.config, 256)).claims == []
    await fill(database_url, pg_schema, due=20_000, later=50_000)
    full = await explain_kept_claim(store, 256)
    text = json.dumps(full)
    assert "$1" in text  # the generic plan: parameters, not values, in its conditions
    assert "Seq Scan" not in text and "Hash" not in text and "Bitmap" not in text
    claimed = [node for node in nodes(full["Plan"]) if node.get("Node Type") == "ModifyTable"]
    assert claimed and claimed[0]["Actual Rows"] == 256
    async with await psycopg.AsyncConnection.connect(database_url) as conn:  # a custom plan
        explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + store.statements["claim"]
        cursor = await conn.execute(explain, {**CLAIM_VALUES, "limit": 256})
        custom = (await cursor.fetchall())[0][0][0]
        await conn.rollback()
    assert pages(full) < 1.5 * pages(custom), (pages(full), pages(custom))
    taken = await store.claim(PlanQueues.work.config, 20_000)
    assert len(taken.claims) == 20_000
    short = await explain_kept_claim(store, 256)
    later = [
        node
        for node in nodes(short["Plan"])
        if node.get("Index Name") == "queue_message_claim" and node.get("Actual Rows", 0) > 2
    ]
    assert not later, "a short claim walked rows due later"
    assert "Seq Scan" not in json.dumps(short)


async def test_a_claim_connection_that_failed_is_closed_and_not_kept(
    database_url: str,
) -> None:
    pool = pool_module.Pool(database_url, 4, "queuey claim-test")
    await pool.open()
    try:
        async with pool.claiming() as conn:
            first = conn
        with pytest.raises(psycopg.errors.DivisionByZero):
            async with pool.claiming() as conn:
                assert conn is first  # kept between claims
                await conn.execute("SELECT 1 / 0")
        assert first.closed
        async with pool.claiming() as conn:
            assert conn is not first and not conn.closed
            assert (await scalar_rows(conn, "SHOW plan_cache_mode")) == [("force_generic_plan",)]
    finally:
        await pool.close()


async def test_claims_beyond_the_kept_connections_hand_theirs_back_without_the_settings(
    database_url: str,
) -> None:
    pool = pool_module.Pool(database_url, 4, "queuey claim-test")  # keeps one
    await pool.open()
    try:
        inside = asyncio.Event()

        async def claim(hold: asyncio.Event) -> psycopg.AsyncConnection[Any]:
            async with pool.claiming() as conn:
                inside.set()
                await hold.wait()
                return conn

        hold = asyncio.Event()
        first = asyncio.create_task(claim(hold))
        await inside.wait()
        inside.clear()
        second = asyncio.create_task(claim(hold))
        await inside.wait()
        hold.set()
        conns = await asyncio.gather(first, second)
        assert conns[0] is not conns[1]
        assert not any(conn.closed for conn in conns)  # one kept, the other reset, not closed
        assert len(pool._claims._free) == 1
        returned = next(conn for conn in conns if conn not in pool._claims._free)
        assert returned.prepare_threshold == 5  # psycopg's default again
        for _ in range(4):  # the pool's connections: none carries the claim settings
            async with pool.connection() as conn:
                assert (await scalar_rows(conn, "SHOW plan_cache_mode")) == [("auto",)]
    finally:
        await pool.close()


async def test_a_kept_claim_connection_broken_while_idle_is_replaced(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool_module, "IDLE_CHECK_SECS", 0.0)  # every kept connection checked
    pool = pool_module.Pool(database_url, 4, "queuey claim-test")
    await pool.open()
    try:
        async with pool.claiming() as conn:
            first = conn
            pid = first.info.backend_pid
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        await asyncio.sleep(0.2)
        async with pool.claiming() as conn:
            assert conn is not first
            assert (await scalar_rows(conn, "SELECT 1")) == [(1,)]
    finally:
        await pool.close()


def test_a_small_pool_keeps_no_claim_connection() -> None:
    pool = pool_module.Pool("postgresql://nobody@127.0.0.1:1/none", 3, "queuey claim-test")
    assert pool._claims.keep == 0
    assert isinstance(pool._claims, ClaimConnections)


async def test_poll_only_leaves_nothing_on_a_session_past_its_transaction(
    database_url: str, pg_schema: str
) -> None:
    """Behind a transaction-mode pooler (``poll_only``), a session's settings or prepared
    statements would stay on a server connection that other clients' transactions use next:
    claims run on plain pooled connections and no statement is ever prepared."""
    async with PostgresBackend(
        database_url, schema=pg_schema, poll_only=True, poll_interval="30s"
    ) as backend:
        producer = await Producer.create(PlanQueues, backend)
        store = store_of(backend)
        for n in range(8):  # more than psycopg's default threshold of 5 runs
            await producer.enqueue(Step(n=n))
            await store.claim(PlanQueues.work.config, 1)
        async with store._where().claiming() as conn:
            assert (await scalar_rows(conn, "SHOW plan_cache_mode")) == [("auto",)]
            assert conn.prepare_threshold is None
            prepared = await scalar_rows(conn, "SELECT count(*) FROM pg_prepared_statements")
            assert prepared == [(0,)]


async def test_a_claim_connection_returned_after_the_pool_closed_is_not_kept(
    database_url: str,
) -> None:
    pool = pool_module.Pool(database_url, 4, "queuey claim-test")
    await pool.open()
    async with pool.claiming() as conn:
        await pool.close()  # the backend closing while a claim is in flight
    assert conn.closed
    assert pool._claims._free == []
