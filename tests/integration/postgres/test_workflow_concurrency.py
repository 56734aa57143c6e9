"""Fan-in members completed at once by four PostgreSQL backends in one process (each with its
own pools and LISTEN connection, so each records its acks in statements of its own that release
the same fan-ins concurrently): every step is claimed and ends, and each fan-in callback runs
once with every member's result, round after round (checked from the handlers' records)."""

from __future__ import annotations

import asyncio
from collections import Counter
from contextlib import AsyncExitStack

import pytest
from psycopg import sql

from queuey import Producer, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.workflows import group
from tests.integration.postgres.test_backend import execute, table
from tests.integration.postgres.workflow_app import Count, FlowQueues, Sum, register

pytestmark = pytest.mark.postgres

BACKENDS, GROUPS, MEMBERS, ROUNDS = 4, 3, 24, 10


async def test_members_completed_at_once_by_four_backends_release_each_fan_in_once(
    database_url: str, pg_schema: str
) -> None:
    runs: list[tuple[str, str]] = []

    async def record(kind: str, key: str) -> None:
        runs.append((kind, key))

    handles = []
    async with AsyncExitStack() as stack:
        backends = [
            await stack.enter_async_context(
                PostgresBackend(database_url, schema=pg_schema, poll_interval="30s")
            )
            for _ in range(BACKENDS)
        ]
        producer = await Producer.create(FlowQueues, backends[0])
        workers = [Worker(FlowQueues, b, concurrency=MEMBERS) for b in backends]
        for worker in workers:
            register(worker, record)
        tasks = [asyncio.create_task(w.run()) for w in workers]
        try:
            for n in range(ROUNDS):  # the poll (30 s) never wakes a claim: notifications do
                members = [
                    group(*(Count(text="x" * m, key=f"{n}.{g}.{m}") for m in range(MEMBERS)))
                    for g in range(GROUPS)
                ]
                flows = [members[g].then(Sum.from_counts) for g in range(GROUPS)]
                started = [await producer.enqueue_workflow(flow) for flow in flows]
                totals = await asyncio.gather(*(h.result(timeout=20) for h in started))
                assert totals == [sum(range(MEMBERS))] * GROUPS, n
                handles += started
        finally:
            for worker in workers:
                worker.shutdown()
            await asyncio.gather(*tasks)
    keys = Counter(key for kind, key in runs if kind == "count")
    expected = {
        f"{n}.{g}.{m}" for n in range(ROUNDS) for g in range(GROUPS) for m in range(MEMBERS)
    }
    assert set(keys) == expected and set(keys.values()) == {1}
    sums = Counter(key for kind, key in runs if kind == "sum")
    assert sums == Counter(f"{h.job_id}|{MEMBERS}" for h in handles)
    query = sql.SQL("SELECT status, count(*) FROM {} GROUP BY status").format(table(pg_schema))
    assert dict(await execute(database_url, query)) == {"done": ROUNDS * GROUPS * (MEMBERS + 1)}
