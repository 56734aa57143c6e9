"""Dynamic fan-out and batches survive SIGKILL on PostgreSQL: a worker killed while the fanning
step runs (before its success commits) leaves no added step and no re-wiring; the step runs
again and fans out once; a worker killed after that commit, while the added steps run, loses
none of them; the successor runs once with every added step's result (checked from the
handlers' own records); a batch whose workers are all killed mid-way releases its callback
once, with the final counts."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from queuey import Producer
from queuey.backends.postgres import PostgresBackend
from queuey.batches import batch
from queuey.workflows import start
from tests.integration.postgres.fan_out_app import Split, Tally
from tests.integration.postgres.test_crash import Fleet, wait_for
from tests.integration.postgres.workflow_app import Count, FlowQueues, Sum

pytestmark = pytest.mark.postgres

WORDS = [f"w{'x' * n}" for n in range(12)]


class SplitFleet(Fleet):
    """Worker subprocesses running ``fan_out_app``."""

    def __init__(self, url: str, schema: str) -> None:
        super().__init__(url, schema, 5)
        self.args = [sys.executable, "-m", "tests.integration.postgres.fan_out_app", url, schema]


@pytest.fixture
async def runs_schema(database_url: str, pg_schema: str) -> AsyncIterator[str]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        runs = sql.Identifier(pg_schema, "runs")
        await conn.execute(sql.SQL("CREATE TABLE {} (kind text, key text, pid int)").format(runs))
    yield pg_schema


async def _one(url: str, query: sql.Composed, *args: object) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(query, args)
        return list(await cursor.fetchall())


async def test_a_kill_before_the_commit_adds_nothing_and_after_it_all(
    database_url: str, runs_schema: str
) -> None:
    schema = runs_schema
    table = sql.Identifier(schema, "queue_message")
    runs = sql.Identifier(schema, "runs")
    kinds = sql.SQL("SELECT kind, key FROM {}").format(runs)
    in_flow = sql.SQL("SELECT count(*) FROM {} WHERE workflow = %s::uuid").format(table)
    text = " ".join(WORDS)
    async with await PostgresBackend.connect(database_url, schema=schema) as backend:
        producer = await Producer.create(Split.job_queue_set(), backend)
        flow = start(Split(text=text, stall_ms=60_000, count_ms=1500)).then_each(Sum.from_counts)
        handle = await producer.enqueue_workflow(flow)
        workers = SplitFleet(database_url, schema)
        try:

            async def split_started() -> bool:
                return any(kind == "split" for kind, _ in await _one(database_url, kinds))

            first = workers.start()
            await wait_for(split_started, 30)
            first.kill()  # SIGKILL while the split stalls, before its success commits
            first.wait()
            assert await _one(database_url, in_flow, handle.workflow_id) == [(2,)]

            async def fanned_out() -> bool:
                rows = await _one(database_url, in_flow, handle.workflow_id)
                return rows == [(2 + len(WORDS),)]

            second = workers.start()
            await wait_for(fanned_out, 30)
            second.kill()  # SIGKILL after the commit, while the added Counts run (1.5 s each)
            second.wait()
            assert await _one(database_url, in_flow, handle.workflow_id) == [(2 + len(WORDS),)]
            workers.start()
            total = await handle.result(timeout=60)
        finally:
            workers.stop()
    assert total == sum(len(w) for w in WORDS)
    records = Counter(kind for kind, _ in await _one(database_url, kinds))
    assert records["split"] == 2 and records["sum"] == 1  # the split ran again once
    counted = {key for kind, key in await _one(database_url, kinds) if kind == "count"}
    assert counted == set(WORDS)


async def test_a_batch_completes_once_while_its_workers_are_killed(
    database_url: str, runs_schema: str
) -> None:
    schema = runs_schema
    kinds = sql.SQL("SELECT kind, key FROM {}").format(sql.Identifier(schema, "runs"))
    members = [Count(text="x" * n, key=f"m{n}", sleep_ms=300) for n in range(60)]
    async with await PostgresBackend.connect(database_url, schema=schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        handle = await producer.enqueue_batch(batch(*members).on_complete(Tally.from_batch))
        workers = SplitFleet(database_url, schema)
        try:
            for _ in range(2):
                workers.start()

            async def some_counted() -> bool:
                rows = await _one(database_url, kinds)
                return sum(1 for kind, _ in rows if kind == "count") >= 10

            await wait_for(some_counted, 60)
            for proc in workers.alive():
                proc.kill()  # SIGKILL every worker mid-batch
                proc.wait()
            workers.start()
            workers.start()

            async def tallied() -> bool:
                return any(kind == "tally" for kind, _ in await _one(database_url, kinds))

            await wait_for(tallied, 90)
            await asyncio.sleep(2)  # a second callback would have run by now
            progress = await handle.progress()
        finally:
            workers.stop()
    rows = await _one(database_url, kinds)
    tallies = [key for kind, key in rows if kind == "tally"]
    assert tallies == [f"{handle.batch_id}|60|60|0|0"]  # released once, with the final counts
    assert progress.ended and progress.done == 60
    assert {key for kind, key in rows if kind == "count"} == {f"m{n}" for n in range(60)}
    lost = sql.SQL("SELECT sum(redeliveries) FROM {} WHERE batch = %s::uuid").format(
        sql.Identifier(schema, "queue_message")
    )
    (redelivered,) = await _one(database_url, lost, handle.batch_id)
    assert int(str(redelivered[0])) > 0  # the kills landed while members ran
