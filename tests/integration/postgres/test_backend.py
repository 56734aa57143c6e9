"""PostgreSQL-specific behaviour: NOTIFY wake-ups and listener recovery, leases and fencing,
retention, bulk enqueue, the claim index, poll-only mode, schema checks."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from queuey import (
    BackendError,
    Envelope,
    Job,
    JobContext,
    Producer,
    Queue,
    QueueSet,
    RetryPolicy,
    SchemaError,
    Worker,
)
from queuey.backends.postgres import PostgresBackend, migrate, process_identity
from queuey.backends.postgres._listen import Outage
from queuey.backends.postgres._sql import migrations
from tests.conftest import unique
from tests.integration.postgres.plans import nodes

pytestmark = pytest.mark.postgres


class PgQueues(QueueSet, prefix="pg"):
    fast = Queue(prefetch=8)
    other = Queue(prefetch=8)


class Ping(Job[PgQueues], queue=PgQueues.fast, name="pg.Ping"):
    n: int = 0
    blob: str = ""
    sleep: float = 0.0


class Pong(Job[PgQueues], queue=PgQueues.other, name="pg.Pong"):
    n: int = 0


async def execute(url: str, query: Any, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall() if cursor.description else []


def table(schema: str) -> sql.Composable:
    return sql.Identifier(schema, "queue_message")


async def until(predicate: Any, timeout: float) -> float:
    began = time.monotonic()
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)
    return time.monotonic() - began


class Harness:
    """A worker running in the background, recording what it handled."""

    def __init__(self, backend: PostgresBackend, **options: Any) -> None:
        self.worker = Worker(PgQueues, backend, **options)
        self.seen: list[int] = []
        self.worker.register(Ping, self.handle)
        self.worker.register(Pong, self.handle)

    async def handle(self, job: Any, ctx: JobContext) -> None:
        if getattr(job, "sleep", 0):
            await asyncio.sleep(job.sleep)
        self.seen.append(job.n)

    async def __aenter__(self) -> Harness:
        self.task = asyncio.create_task(self.worker.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.worker.shutdown()
        await self.task


async def listening(backend: PostgresBackend) -> None:
    await asyncio.sleep(0.05)
    assert backend.listener is not None
    await asyncio.wait_for(backend.listener.connected.wait(), 10)


async def test_notify_wakes_the_worker_long_before_the_poll(backend: PostgresBackend) -> None:
    producer = await Producer.create(PgQueues, backend)
    async with Harness(backend) as harness:
        await listening(backend)
        await asyncio.sleep(0.2)
        await producer.enqueue(Ping(n=1))
        waited = await until(lambda: harness.seen == [1], timeout=10)
    assert waited < 2.0, "a NOTIFY wake-up must not wait for the 30 s poll"


async def test_a_killed_listener_is_noticed_and_nothing_waits_for_the_poll(
    backend: PostgresBackend, database_url: str
) -> None:
    producer = await Producer.create(PgQueues, backend)
    async with Harness(backend) as harness:
        await listening(backend)
        killed = await execute(
            database_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            f"queuey-listen {backend.owner}"[:63],
        )
        assert killed == [(True,)]
        await producer.enqueue(Ping(n=1))  # published while the listener is down
        waited = await until(lambda: harness.seen == [1], timeout=15)
        assert waited < 8.0
        await asyncio.sleep(0.5)
        await producer.enqueue(Ping(n=2))
        assert await until(lambda: harness.seen == [1, 2], timeout=10) < 2.0


async def test_one_notification_per_queue_per_transaction_without_payload(
    backend: PostgresBackend, database_url: str
) -> None:
    producer = await Producer.create(PgQueues, backend)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(backend.channel)))
        await producer.enqueue_many([Ping(n=n) for n in range(50)])
        await producer.enqueue(Ping(n=99, blob="x" * 1_000_000))
        notes = [n async for n in conn.notifies(timeout=1.0)]
    assert [n.payload for n in notes] == ["pg.fast", "pg.fast"]
    async with Harness(backend) as harness:
        await until(lambda: len(harness.seen) == 51, timeout=15)
    assert 99 in harness.seen


async def test_bulk_enqueue_of_ten_thousand_is_one_statement(
    backend: PostgresBackend, database_url: str
) -> None:
    producer = await Producer.create(PgQueues, backend)
    calls: list[int] = []
    original = backend.publish

    async def counting(envelopes: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(len(envelopes))
        await original(envelopes, *args, **kwargs)

    backend.publish = counting  # type: ignore[method-assign]
    ids = await producer.enqueue_many([Ping(n=n) for n in range(10_000)])
    assert calls == [10_000] and len(set(ids)) == 10_000
    assert await backend.count_pending(PgQueues.fast.name) == 10_000


async def test_a_slow_job_keeps_its_lease_through_the_heartbeat(
    database_url: str, pg_schema: str
) -> None:
    async with (
        PostgresBackend(database_url, schema=pg_schema, lease="1s", poll_interval="200ms") as a,
        PostgresBackend(database_url, schema=pg_schema, lease="1s", poll_interval="200ms") as b,
    ):
        producer = await Producer.create(PgQueues, a)
        await producer.enqueue(Ping(n=1, sleep=3.0))
        async with Harness(a) as first, Harness(b) as second:
            await until(lambda: first.seen or second.seen, timeout=15)
            await asyncio.sleep(1.5)
        assert sorted(first.seen + second.seen) == [1], "the job ran twice: its lease was stolen"


async def test_a_late_outcome_from_a_lost_claim_is_refused(
    database_url: str, pg_schema: str
) -> None:
    async with (
        PostgresBackend(database_url, schema=pg_schema, lease="1s") as stalled,
        PostgresBackend(database_url, schema=pg_schema, lease="30s") as healthy,
    ):
        producer = await Producer.create(PgQueues, stalled)
        await producer.enqueue(Ping(n=1))
        old = stalled.consumer(PgQueues.fast.config)
        late = await old.next()
        assert late is not None
        stalled._held.clear()  # a stalled process: its heartbeat no longer covers the row
        await asyncio.sleep(1.2)
        await healthy.sweep()
        fresh = await healthy.consumer(PgQueues.fast.config).next()
        assert fresh is not None and fresh.envelope.attempt == 2
        with pytest.raises(BackendError, match="claim was lost"):
            await late.ack()
        with pytest.raises(BackendError, match="claim was lost"):
            await late.dead_letter("too late")
        await fresh.ack()
        rows = await execute(
            database_url,
            sql.SQL("SELECT status, attempts, redeliveries FROM {}").format(table(pg_schema)),
        )
        assert rows == [("done", 2, 1)]
        await old.stop()


async def test_an_outcome_survives_a_reset_pool_connection(
    backend: PostgresBackend, database_url: str
) -> None:
    producer = await Producer.create(PgQueues, backend)
    await producer.enqueue(Ping(n=1))
    consumer = backend.consumer(PgQueues.fast.config)
    delivery = await consumer.next()
    assert delivery is not None
    await execute(
        database_url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        f"queuey {backend.owner}"[:63],
    )
    await delivery.ack()
    rows = await execute(
        database_url, sql.SQL("SELECT status FROM {}").format(table(backend.statements.schema))
    )
    assert rows == [("done",)]
    await consumer.stop()


async def test_retention_deletes_old_done_rows_in_batches_and_keeps_failed(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema, retain="1h") as backend:
        producer = await Producer.create(PgQueues, backend)
        await producer.enqueue_many([Ping(n=n) for n in range(2500)])
        await execute(
            database_url,
            sql.SQL(
                "UPDATE {} SET status = CASE WHEN (payload->>'n')::int < 10 THEN 'failed' "
                "ELSE 'done' END, processed_at = now() - interval '2 hours'"
            ).format(table(pg_schema)),
        )
        await producer.enqueue(Ping(n=-1))
        await execute(
            database_url,
            sql.SQL(
                "UPDATE {} SET status = 'done', processed_at = now() WHERE payload->>'n' = '-1'"
            ).format(table(pg_schema)),
        )
        assert await backend.prune() == 2490
    rows = await execute(
        database_url,
        sql.SQL("SELECT status, count(*) FROM {} GROUP BY status ORDER BY status").format(
            table(pg_schema)
        ),
    )
    assert rows == [("done", 1), ("failed", 10)]


async def test_retention_zero_keeps_everything(database_url: str, pg_schema: str) -> None:
    async with PostgresBackend(database_url, schema=pg_schema, retain=None) as backend:
        assert await backend.prune() == 0


async def test_the_claim_uses_the_partial_index_beside_many_done_rows(
    backend: PostgresBackend, database_url: str
) -> None:
    schema = backend.statements.schema
    await execute(
        database_url,
        sql.SQL(
            "INSERT INTO {} (id, kind, queue, job_type, status, payload, processed_at) "
            "SELECT gen_random_uuid(), 'job', 'pg.fast', 'pg.Ping', 'done', '{{}}', now() "
            "FROM generate_series(1, 100000)"
        ).format(table(schema)),
    )
    producer = await Producer.create(PgQueues, backend)
    await producer.enqueue_many([Ping(n=n) for n in range(20)])
    await execute(database_url, sql.SQL("ANALYZE {}").format(table(schema)))
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        plan = json.dumps(await _explained_claim(conn, backend))
    assert "queue_message_claim" in plan
    assert "Seq Scan" not in plan
    scanned = [
        node
        for node in nodes(json.loads(plan)[0]["Plan"])
        if node.get("Index Name") == "queue_message_claim"
    ]
    assert scanned and all(node["Actual Rows"] <= 20 for node in scanned)


async def test_a_short_claim_finds_the_next_due_row_without_scanning_the_later_rows(
    backend: PostgresBackend, database_url: str
) -> None:
    """The claim that takes fewer rows than asked also says when the next row falls due; it
    finds it by one probe per priority present, and it finds the rows due now by one bounded
    range per priority: neither walks the 100,000 rows due later (counted in pages touched,
    which include the rows a scan filters out; one scan in claim order read the whole table)."""
    schema = backend.statements.schema
    await execute(
        database_url,
        sql.SQL(
            "INSERT INTO {} (id, kind, queue, job_type, payload, priority, available_at) "
            "SELECT gen_random_uuid(), 'job', 'pg.fast', 'pg.Ping', '{{}}', g %% 3, "
            "now() + interval '1 hour' + g * interval '1 s' FROM generate_series(1, 100000) g"
        ).format(table(schema)),
    )
    producer = await Producer.create(PgQueues, backend)
    await producer.enqueue_many([Ping(n=n) for n in range(5)])
    await execute(database_url, sql.SQL("ANALYZE {}").format(table(schema)))
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(backend.statements["claim"], _CLAIM_PARAMS)
        rows = await cursor.fetchall()
        columns = [column.name for column in cursor.description or ()]
        await conn.rollback()
        plan = await _explained_claim(conn, backend)
    assert len(rows) == 5
    due_in = rows[0][columns.index("due_in")]
    assert 3500 < due_in < 3602  # the first later row: an hour and a second after the insert
    scanned = [
        node for node in nodes(plan[0]["Plan"]) if node.get("Index Name") == "queue_message_claim"
    ]
    assert scanned
    read = sum(node["Actual Rows"] * node.get("Actual Loops", 1) for node in scanned)
    assert read < 100, f"{read} index entries read for one claim"
    root = plan[0]["Plan"]
    pages = root["Shared Hit Blocks"] + root["Shared Read Blocks"]
    assert "Seq Scan" not in json.dumps(plan)
    assert pages < 400, f"{pages} pages read by one short claim (the table holds ~1,800)"


async def test_a_short_claim_walks_the_entries_of_drained_rows_once(
    backend: PostgresBackend, database_url: str
) -> None:
    """Rows claimed since the last vacuum leave dead entries at the front of their priority's
    index range. The loose scan steps over them to find each priority's first pending row; the
    range of rows due now then starts at that row instead of walking them a second time."""
    schema = backend.statements.schema
    await execute(
        database_url,
        sql.SQL(
            "INSERT INTO {} (id, kind, queue, job_type, payload, available_at) "
            "SELECT gen_random_uuid(), 'job', 'pg.fast', 'pg.Ping', '{{}}', "
            "now() - interval '1 hour' + g * interval '1 ms' FROM generate_series(1, 30000) g"
        ).format(table(schema)),
    )
    await execute(
        database_url,
        sql.SQL("UPDATE {} SET status = 'done', processed_at = now()").format(table(schema)),
    )
    producer = await Producer.create(PgQueues, backend)
    await producer.enqueue(Ping(n=1))
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        plan = await _explained_claim(conn, backend)
    ranges = [
        node
        for node in nodes(plan[0]["Plan"])
        if node.get("Index Name") == "queue_message_claim"
        and "available_at <= now()" in node.get("Index Cond", "")
    ]
    assert len(ranges) == 1 and ranges[0]["Actual Rows"] == 1
    pages = ranges[0]["Shared Hit Blocks"] + ranges[0]["Shared Read Blocks"]
    assert pages < 20, f"the range of rows due now read {pages} pages past drained entries"


async def test_a_claim_takes_the_first_due_rows_across_priorities_skipping_held_ones(
    backend: PostgresBackend, database_url: str
) -> None:
    """The claim reads one priority at a time; what it takes is still the first ``limit`` due
    rows in claim order (priority, due time, insertion), minus rows another transaction holds,
    never a row due later, and never more than ``limit``."""
    schema = backend.statements.schema
    rows = [  # (name, priority, seconds from now)
        ("p2-late", 2, 3600), ("p0-a", 0, -30), ("p2-a", 2, -10), ("p1-a", 1, -50),
        ("p2-held", 2, -20), ("p0-b", 0, -40), ("p1-late", 1, 600), ("p2-b", 2, -5),
        ("p1-b", 1, -60), ("p3-late", 3, 60),
    ]  # fmt: skip
    for name, priority, offset in rows:
        await execute(
            database_url,
            sql.SQL(
                "INSERT INTO {} (id, kind, queue, job_type, payload, priority, available_at) "
                "VALUES (gen_random_uuid(), 'job', 'pg.fast', 'pg.Ping', %s::json, %s, "
                "now() + make_interval(secs => %s))"
            ).format(table(schema)),
            json.dumps({"name": name}),
            priority,
            offset,
        )
    held_query = sql.SQL("SELECT id FROM {} WHERE payload->>'name' = 'p2-held' FOR UPDATE").format(
        table(schema)
    )
    async with await psycopg.AsyncConnection.connect(database_url) as holder:
        await holder.execute(held_query)  # held until the end of this block
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            taken = []
            for limit in (3, 3, 3):
                params = {**_CLAIM_PARAMS, "limit": limit}
                cursor = await conn.execute(backend.statements["claim"], params)
                found = [row for row in await cursor.fetchall() if row[0] is not None]
                await conn.commit()
                assert len(found) <= limit
                taken.append([json.loads(row[5])["name"] for row in sorted(found, key=_position)])
    assert taken == [["p2-a", "p2-b", "p1-b"], ["p1-a", "p0-b", "p0-a"], []]


def _position(row: tuple[Any, ...]) -> int:
    position: int = row[9]
    return position


async def test_the_claim_alone_commits_without_waiting_for_the_disk(
    backend: PostgresBackend, database_url: str
) -> None:
    """A full claim, a short one and an empty one turn ``synchronous_commit`` off for their
    own transaction; the connection (a pooled one, which a handler's transaction may borrow
    next) keeps durable commits."""
    producer = await Producer.create(PgQueues, backend)
    await producer.enqueue_many([Ping(n=n) for n in range(3)])
    show = "SELECT current_setting('synchronous_commit')"
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        for limit in (2, 10, 10):  # full, short (one left), empty
            await conn.execute(backend.statements["claim"], {**_CLAIM_PARAMS, "limit": limit})
            assert (await (await conn.execute(show)).fetchone()) == ("off",)
            await conn.commit()
            assert (await (await conn.execute(show)).fetchone()) == ("on",)
            await conn.commit()
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(backend.statements["claim"], _CLAIM_PARAMS)
        assert (await (await conn.execute(show)).fetchone()) == ("on",)


_CLAIM_PARAMS = {
    "kind": "job",
    "queue": "pg.fast",
    "limit": 10,
    "owner": "x",
    "lease": 30.0,
    "job_types": None,
    "app": None,
}
"""A claim of up to 10 rows of ``pg.fast``, as a worker sends it."""


async def _explained_claim(conn: psycopg.AsyncConnection[Any], backend: PostgresBackend) -> Any:
    """``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` of the claim (``_CLAIM_PARAMS``), rolled
    back."""
    explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + backend.statements["claim"]
    cursor = await conn.execute(explain, _CLAIM_PARAMS)
    plan = (await cursor.fetchone())[0]  # type: ignore[index]
    await conn.rollback()
    return plan


async def test_poll_only_mode_delivers_without_listen(database_url: str, pg_schema: str) -> None:
    async with PostgresBackend(
        database_url, schema=pg_schema, poll_only=True, poll_interval="200ms"
    ) as backend:
        producer = await Producer.create(PgQueues, backend)
        async with Harness(backend) as harness:
            await producer.enqueue(Ping(n=1))
            await until(lambda: harness.seen == [1], timeout=10)
            listeners = await execute(
                database_url,
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name LIKE 'queuey-listen%%' "
                "AND application_name LIKE %s",
                f"%{backend.owner}"[:40] + "%",
            )
        assert backend.listener is None and listeners == [(0,)]


async def test_graceful_shutdown_past_the_grace_releases_rows(
    backend: PostgresBackend, database_url: str
) -> None:
    producer = await Producer.create(PgQueues, backend)
    await producer.enqueue_many([Ping(n=n, sleep=30) for n in range(3)])
    harness = Harness(backend, shutdown_grace="300ms")
    async with harness:
        await until(lambda: harness.worker.in_flight == 3, timeout=10)
    rows = await execute(
        database_url,
        sql.SQL("SELECT status, attempts, count(*) FROM {} GROUP BY 1, 2").format(
            table(backend.statements.schema)
        ),
    )
    assert rows == [("pending", 0, 3)]


async def test_an_old_schema_is_refused_until_migrated(database_url: str) -> None:
    schema = unique("old")
    try:
        with pytest.raises(SchemaError, match="run `queuey db migrate --schema"):
            await PostgresBackend.connect(database_url, schema=schema)
        results = await asyncio.gather(*(migrate(database_url, schema=schema) for _ in range(3)))
        assert sorted(len(r) for r in results) == [0, 0, len(migrations())]
        backend = await PostgresBackend.connect(database_url, schema=schema)
        await backend.close()
        await backend.close()
    finally:
        await execute(
            database_url, sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


async def test_unreachable_database_is_a_backend_error_without_the_password() -> None:
    url = "postgresql://postgres:s3cret-pw@127.0.0.1:1/test"
    with pytest.raises(BackendError) as caught:
        await PostgresBackend.connect(url)
    assert "s3cret-pw" not in str(caught.value)
    assert "s3cret-pw" not in repr(PostgresBackend(url))


def test_process_identity_is_unique_per_instance() -> None:
    first, second = process_identity(), process_identity()
    assert first != second and first.count(":") == 2


def test_an_outage_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="queuey.postgres")
    outage = Outage("PostgreSQL")
    for _ in range(5):
        outage.failed(OSError("connection refused to postgresql://u:hunter2@h/db"))
    outage.recovered()
    outage.recovered()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and "hunter2" not in messages[0]


async def test_transactional_publish_commits_with_the_caller(
    backend: PostgresBackend, database_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await backend.publish([Envelope.new("pg.Ping", "pg.fast", {"n": 1})], connection=conn)
        assert await backend.count_pending("pg.fast") == 0
        await conn.commit()
    assert await backend.count_pending("pg.fast") == 1
    assert await backend.count_pending("pg.fast", kind="topic") == 0
    await backend.publish([Envelope.new("x", "pg.fast", {})], timedelta(seconds=60))
    assert await backend.count_pending("pg.fast") == 1


class Flaky(
    Job[PgQueues], queue=PgQueues.other, name="pg.Flaky", retry=RetryPolicy.fixed(2, "50ms")
):
    n: int = 0


async def test_a_lost_worker_does_not_spend_a_retry(database_url: str, pg_schema: str) -> None:
    async with PostgresBackend(database_url, schema=pg_schema, lease="1s") as backend:
        producer = await Producer.create(PgQueues, backend)
        await producer.enqueue(Flaky())
        assert await backend.claim(PgQueues.other.config, 1)  # a worker that then dies
        backend._held.clear()
        await asyncio.sleep(1.2)
        await backend.sweep()
        worker = Worker(PgQueues, backend)
        seen: list[tuple[int, int, bool]] = []

        @worker.handler(Flaky)
        async def handle(job: Flaky, ctx: JobContext) -> None:
            seen.append((ctx.attempt, ctx.redeliveries, ctx.is_last_attempt))
            if len(seen) == 1:
                raise RuntimeError("first real failure")

        task = asyncio.create_task(worker.run())
        await until(lambda: worker.stats[PgQueues.other.name].succeeded == 1, timeout=15)
        worker.shutdown()
        await task
    assert seen == [(2, 1, False), (3, 1, True)]
