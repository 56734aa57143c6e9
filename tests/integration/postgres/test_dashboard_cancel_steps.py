"""The dashboard's Cancel of a workflow step ends the workflow's steps as ``queuey jobs cancel``
does: the same shape cancelled from either ends every step in the same state, with the same
error and the same inputs (a step downstream through a chain link fails with it; a fan-in run
with partial results gets its error and one parent less); a waiting step can be cancelled from
its job page too. Each path writes its audit row."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from psycopg import sql

from queuey import Producer
from queuey.backends.postgres import Admin, PgDashboardStore, PostgresBackend
from queuey.workflows import Workflow, chain, group
from tests.integration.postgres import dashboard_helpers as helpers
from tests.integration.postgres.workflow_app import Count, Double, FlowQueues, Sum

pytestmark = pytest.mark.postgres

Cancel = Callable[[str], Awaitable[Any]]


@pytest.fixture
async def store(database_url: str, pg_schema: str) -> AsyncIterator[PgDashboardStore]:
    async with PgDashboardStore(database_url, schema=pg_schema, topic_channel="shop_queue") as s:
        yield s


def _shapes() -> dict[str, Callable[[], Workflow[Any]]]:
    return {
        "chain": lambda: chain(Count(text="ab"), Double.from_count, Double.from_count),
        "partial fan-in": lambda: chain(
            group(Count(text="ab"), Count(text="c")).then_partial(Sum.from_some),
            Double.from_count,
        ),
    }


async def _steps(url: str, schema: str, flow: Workflow[Any]) -> list[tuple[Any, ...]]:
    """Each step's status, error, parents left and inputs, step ids spelt by position."""
    table = sql.Identifier(schema, "queue_message")
    query = sql.SQL(
        "SELECT status, error, parents_left, inputs::text FROM {} WHERE id = %s"
    ).format(table)
    ids = [node.job_id for node in flow.nodes]
    found = []
    for job_id in ids:
        rows = await helpers.execute(url, query, [job_id])
        text = repr(rows[0])
        for position, other in enumerate(ids):
            text = text.replace(other, f"<step {position}>")
        found.append((text,))
    return found


async def _cancelled(
    url: str, schema: str, make: Callable[[], Workflow[Any]], step: int, cancel: Cancel
) -> tuple[list[tuple[Any, ...]], Any]:
    async with PostgresBackend(url, schema=schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        flow = make()
        await producer.enqueue_workflow(flow)
    outcome = await cancel(flow.nodes[step].job_id)
    return await _steps(url, schema, flow), outcome


@pytest.mark.parametrize("shape", list(_shapes()))
@pytest.mark.parametrize("step", [0, -1], ids=["pending step", "waiting step"])
async def test_dashboard_cancel_of_a_step_ends_the_workflow_as_the_cli_does(
    store: PgDashboardStore, database_url: str, pg_schema: str, shape: str, step: int
) -> None:
    make = _shapes()[shape]
    admin = Admin(database_url, schema=pg_schema)
    by_cli, said = await _cancelled(database_url, pg_schema, make, step, admin.cancel)
    by_dashboard, count = await _cancelled(
        database_url, pg_schema, make, step, lambda job_id: store.cancel("ops@example", job_id)
    )
    assert (said, count) == ("cancelled", 1)
    assert by_dashboard == by_cli
    assert "'cancelled'" in by_cli[step][0]
    if step == 0:  # the steps after it failed with it or got its error: none waits for it
        assert any("<step 0>" in later[0] for later in by_cli[1:])
    entries = [(e.actor, e.action, e.count) for e in reversed(await store.audit())]
    assert entries == [(admin.actor, "cancel", 1), ("ops@example", "cancel", 1)]


async def test_a_waiting_step_is_cancelled_from_its_job_page(
    store: PgDashboardStore, database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        flow = chain(Count(text="ab"), Double.from_count, Double.from_count)
        await producer.enqueue_workflow(flow)
    waiting = flow.nodes[1].job_id
    async with helpers.client(helpers.dashboard(store)) as http:
        await helpers.sign_in(http, helpers.ADMIN_KEY)
        page = (await http.get(f"{helpers.BASE}/jobs/{waiting}")).text
        assert 'data-action="cancel"' in page
        form = {"id": waiting, "csrf": helpers.csrf_of(page), "confirm": "yes"}
        done = await http.post(f"{helpers.BASE}/actions/cancel", data=form)
        shown = (await http.get(done.headers["location"])).text
    assert "Cancelled 1 job(s)" in shown
    steps = await _steps(database_url, pg_schema, flow)
    assert [s[0].split("'")[1] for s in steps] == ["pending", "cancelled", "failed"]
    assert "workflow failed: step <step 1> failed: cancelled" in steps[2][0]
