"""A workflow of 5 groups of 20 steps, each group with a fan-in and one final fan-in over the
five, completes while real worker processes are killed with SIGKILL: no step is lost, none is
completed twice, and each fan-in callback's job is released once, with every member's result
(checked from the handlers' own records)."""

from __future__ import annotations

import asyncio
import random
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from queuey import Producer
from queuey.backends.postgres import PostgresBackend
from queuey.workflows import Workflow, group
from tests.integration.postgres.test_crash import Fleet, statuses, wait_for
from tests.integration.postgres.workflow_app import Count, FlowQueues, Sum

pytestmark = pytest.mark.postgres

GROUPS, MEMBERS = 5, 20


class FlowFleet(Fleet):
    """Worker subprocesses running ``workflow_app``."""

    def __init__(self, url: str, schema: str) -> None:
        super().__init__(url, schema, 5)
        self.args = [sys.executable, "-m", "tests.integration.postgres.workflow_app", url, schema]


@pytest.fixture
async def flow_schema(database_url: str, pg_schema: str) -> AsyncIterator[str]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        runs = sql.Identifier(pg_schema, "runs")
        await conn.execute(sql.SQL("CREATE TABLE {} (kind text, key text, pid int)").format(runs))
    yield pg_schema


async def records(url: str, schema: str, kind: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        query = sql.SQL("SELECT key FROM {} WHERE kind = %s").format(sql.Identifier(schema, "runs"))
        cursor = await conn.execute(query, (kind,))
        return [key for (key,) in await cursor.fetchall()]


async def lost_runs(url: str, schema: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        query = sql.SQL("SELECT sum(redeliveries) FROM {}")
        cursor = await conn.execute(query.format(sql.Identifier(schema, "queue_message")))
        row = await cursor.fetchone()
        return int(row[0] or 0) if row else 0


async def redeliveries(url: str, schema: str) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        query = sql.SQL("SELECT id::text, redeliveries FROM {} WHERE job_type = 'flows.Sum'")
        cursor = await conn.execute(query.format(sql.Identifier(schema, "queue_message")))
        return dict(await cursor.fetchall())


def fan_out(rng: random.Random) -> Workflow[int]:
    groups = [
        group(
            *(
                Count(text="x" * m, key=f"{g}-{m}", sleep_ms=rng.randint(500, 2500))
                for m in range(MEMBERS)
            )
        ).then(Sum.from_counts)
        for g in range(GROUPS)
    ]
    return group(*groups).then(Sum.from_counts)


async def test_sigkilled_workers_lose_no_step_and_release_each_fan_in_once(
    database_url: str, flow_schema: str
) -> None:
    rng = random.Random(31)
    steps = GROUPS * MEMBERS + GROUPS + 1
    async with await PostgresBackend.connect(database_url, schema=flow_schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        handle = await producer.enqueue_workflow(fan_out(rng))
        workers = FlowFleet(database_url, flow_schema)
        for _ in range(3):
            workers.start()
        try:
            for _ in range(10):
                await asyncio.sleep(rng.uniform(0.3, 0.9))
                workers.kill_one(rng)
                workers.start()

            async def all_done() -> bool:
                return (await statuses(database_url, flow_schema)).get("done", 0) == steps

            await wait_for(all_done, timeout=120)
            total = await handle.result(timeout=10)
        finally:
            workers.stop()
        killed = sum(1 for p in workers.procs if p.returncode == -signal.SIGKILL)
    assert killed >= 8
    assert await lost_runs(database_url, flow_schema) > 0  # kills landed mid-step
    assert total == GROUPS * sum(range(MEMBERS))
    assert await statuses(database_url, flow_schema) == {"done": steps}
    counted = set(await records(database_url, flow_schema, "count"))
    assert counted == {f"{g}-{m}" for g in range(GROUPS) for m in range(MEMBERS)}
    sums = [key.split("|") for key in await records(database_url, flow_schema, "sum")]
    assert {size for _, size in sums} == {str(MEMBERS), str(GROUPS)}  # every member's result
    runs = Counter(job_id for job_id, _ in sums)
    lost = await redeliveries(database_url, flow_schema)
    assert set(runs) == set(lost) and len(lost) == GROUPS + 1  # one callback job per fan-in
    for job_id, count in runs.items():  # a second run only after its worker was killed
        assert count <= 1 + lost[job_id], (job_id, count, lost[job_id])
