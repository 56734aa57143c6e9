"""The dashboard's Retry and Discard run the statements ``queuey failed retry|discard`` run:
a cancelled batch member retried from either leaves its batch alike, and a failed workflow step
retried from either makes the steps that failed with it wait again alike."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from psycopg import sql

from queuey import Producer
from queuey.backends.postgres import Admin, PgDashboardStore, PostgresBackend
from queuey.batches import batch
from queuey.workflows import chain
from tests.integration.postgres.dashboard_helpers import execute
from tests.integration.postgres.test_batches import Done, Member, Race
from tests.integration.postgres.workflow_app import Count, Double, FlowQueues

pytestmark = pytest.mark.postgres

ROW = (
    "SELECT status, attempts, batch IS NULL, headers::jsonb ? 'queuey-batch', parents_left, "
    "error FROM {} WHERE id = %s"
)


@pytest.fixture
async def store(database_url: str, pg_schema: str) -> AsyncIterator[PgDashboardStore]:
    async with PgDashboardStore(database_url, schema=pg_schema) as s:
        yield s


async def _row(url: str, schema: str, job_id: str) -> tuple[Any, ...]:
    query = sql.SQL(ROW).format(sql.Identifier(schema, "queue_message"))
    return tuple((await execute(url, query, [job_id]))[0])


async def test_a_cancelled_batch_member_retried_leaves_its_batch_from_either(
    store: PgDashboardStore, database_url: str, pg_schema: str
) -> None:
    admin = Admin(database_url, schema=pg_schema)
    members = []
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(Race, backend)
        for _ in range(2):
            handle = await producer.enqueue_batch(
                batch(Member(n=1), Member(n=2)).on_complete(Done.from_batch)
            )
            assert await producer.cancel(handle.job_ids[0]) == "cancelled"
            members.append(handle.job_ids[0])
    (touched,) = await admin.retry(members[0], status="cancelled")
    assert touched.count == 1
    assert await store.retry("ops@example", job_id=members[1]) == 1
    by_cli = await _row(database_url, pg_schema, members[0])
    assert by_cli[:4] == ("pending", 0, True, False)
    assert await _row(database_url, pg_schema, members[1]) == by_cli


async def test_a_failed_step_retried_makes_the_steps_after_it_wait_again_from_either(
    store: PgDashboardStore, database_url: str, pg_schema: str
) -> None:
    admin = Admin(database_url, schema=pg_schema)
    table = sql.Identifier(pg_schema, "queue_message")
    fail = sql.SQL(
        "UPDATE {} SET status = 'failed', error = 'boom', processed_at = now() WHERE id = %s"
    ).format(table)
    flows = []
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        for _ in range(2):
            flow = chain(Count(text="ab"), Double.from_count)
            await producer.enqueue_workflow(flow)
            first, second = (node.job_id for node in flow.nodes)
            await execute(database_url, fail, [first])
            flows.append((first, second))
    doom = sql.SQL(
        "UPDATE {} SET status = 'failed', error = 'workflow failed: step ' || %s || "
        "' failed: boom', processed_at = now() WHERE id = %s"
    ).format(table)
    edges = sql.SQL("DELETE FROM {} WHERE parent = %s").format(
        sql.Identifier(pg_schema, "queue_message_workflow_edges")
    )
    for first, second in flows:  # as dead_letter leaves them
        await execute(database_url, doom, [first, second])
        await execute(database_url, edges, [first])
    await admin.retry(flows[0][0])
    assert await store.retry("ops@example", job_id=flows[1][0]) == 1
    by_cli = [await _row(database_url, pg_schema, job_id) for job_id in flows[0]]
    assert [r[0] for r in by_cli] == ["pending", "waiting"]
    assert [await _row(database_url, pg_schema, job_id) for job_id in flows[1]] == by_cli
