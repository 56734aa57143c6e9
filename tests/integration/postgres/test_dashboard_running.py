"""The dashboard on a job that still runs: Cancel asks for the cancel (the row stays running,
held by its worker, until the run ends), and Retry or Discard of it does nothing and says the
job still runs (even once its cancel was asked for)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from psycopg import sql

from queuey import Producer
from queuey.backends.postgres import PgDashboardStore, PostgresBackend
from queuey.workflows import chain
from tests.integration.postgres.dashboard_helpers import (
    ADMIN_KEY,
    BASE,
    client,
    csrf_of,
    dashboard,
    execute,
    seed,
    sign_in,
    status_of,
)
from tests.integration.postgres.workflow_app import Count, Double, FlowQueues

pytestmark = pytest.mark.postgres


@pytest.fixture
async def store(database_url: str, pg_schema: str) -> AsyncIterator[PgDashboardStore]:
    async with PgDashboardStore(database_url, schema=pg_schema, topic_channel="shop_queue") as s:
        yield s


async def test_retry_or_discard_of_a_running_job_is_refused_saying_it_still_runs(
    store: PgDashboardStore, database_url: str, pg_schema: str
) -> None:
    ids = await seed(database_url, pg_schema)
    job_id = ids["pending"]
    table = sql.Identifier(pg_schema, "queue_message")
    claim = sql.SQL(
        "UPDATE {} SET status = 'running', attempts = 1, claimed_by = 'w:1:0', "
        "lease_until = now() + interval '1 hour' WHERE id = %s"
    ).format(table)
    await execute(database_url, claim, [job_id])
    shown: dict[str, str] = {}
    async with client(dashboard(store)) as http:
        await sign_in(http, ADMIN_KEY)
        csrf = csrf_of((await http.get(f"{BASE}/")).text)
        for action in ("cancel", "retry", "discard"):
            form = {"id": job_id, "csrf": csrf, "confirm": "yes"}
            done = await http.post(f"{BASE}/actions/{action}", data=form)
            shown[action] = (await http.get(done.headers["location"])).text
    assert "Cancelled 1 job(s) (a running one when its run ends)." in shown["cancel"]
    for action in ("retry", "discard"):
        assert "The job still runs: nothing was done." in shown[action], action
    assert await status_of(database_url, pg_schema, job_id) == "running"
    asked = sql.SQL("SELECT cancel_requested_at IS NOT NULL, claimed_by FROM {} WHERE id = %s")
    assert await execute(database_url, asked.format(table), [job_id]) == [(True, "w:1:0")]


async def test_retry_of_a_workflow_step_that_never_ran_is_refused_saying_so(
    store: PgDashboardStore, database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        step = await producer.enqueue_workflow(chain(Count(text="a"), Double.from_count))
        assert await producer.cancel(step.job_id) == "cancelled"  # while waiting: never built
    async with client(dashboard(store)) as http:
        await sign_in(http, ADMIN_KEY)
        csrf = csrf_of((await http.get(f"{BASE}/")).text)
        form = {"id": step.job_id, "csrf": csrf, "confirm": "yes"}
        done = await http.post(f"{BASE}/actions/retry", data=form)
        shown = (await http.get(done.headers["location"])).text
    assert "This job is a workflow step that never ran" in shown
    assert await status_of(database_url, pg_schema, step.job_id) == "cancelled"
