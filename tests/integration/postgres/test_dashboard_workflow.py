"""The dashboard's workflow page (PostgreSQL): the workflow as server-rendered SVG, a node per
step coloured by its state linking to its job, an edge from each parent to its child; every
text escaped; linked from each step's job page; 404 for an unknown workflow."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator

import pytest
from psycopg import sql

from queuey import Producer
from queuey.backends.postgres import PgDashboardStore, PostgresBackend
from queuey.dashboard.graph import STATE_COLOURS
from queuey.workflows import chain, group
from tests.integration.postgres.dashboard_helpers import (
    ADMIN_KEY,
    BASE,
    XSS_ERROR,
    client,
    csrf_of,
    dashboard,
    execute,
    seed,
    sign_in,
)
from tests.integration.postgres.workflow_app import Count, Double, FlowQueues, Sum

pytestmark = pytest.mark.postgres
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
async def store(database_url: str, pg_schema: str) -> AsyncIterator[PgDashboardStore]:
    async with PgDashboardStore(database_url, schema=pg_schema, topic_channel="shop_queue") as s:
        yield s


def _svg(html: str) -> ET.Element:
    start = html.index('<svg class="workflow"')
    return ET.fromstring(html[start : html.index("</svg>", start) + len("</svg>")])


async def test_the_workflow_page_draws_each_step_and_edge(
    store: PgDashboardStore, database_url: str, pg_schema: str
) -> None:
    plain = (await seed(database_url, pg_schema))["pending"]
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        flow = chain(
            group(Count(text="ab"), Count(text="c")).then(Sum.from_counts), Double.from_count
        )
        handle = await producer.enqueue_workflow(flow)
        ids = [node.job_id for node in flow.nodes]
        assert await producer.cancel(ids[1]) == "cancelled"  # Sum and Double fail with it
    table = sql.Identifier(pg_schema, "queue_message")
    await execute(  # a step's error as an attacker might write it
        database_url,
        sql.SQL("UPDATE {} SET error = %s WHERE id = %s").format(table),
        [XSS_ERROR, ids[3]],
    )
    async with client(dashboard(store)) as http:
        await sign_in(http, ADMIN_KEY)
        page = await http.get(f"{BASE}/workflows/{handle.workflow_id}")
        by_step = await http.get(f"{BASE}/workflows/{ids[2]}")
        job_page = (await http.get(f"{BASE}/jobs/{ids[0]}")).text
        plain_page = (await http.get(f"{BASE}/jobs/{plain}")).text
        missing = await http.get(f"{BASE}/workflows/{uuid.uuid4()}")
        bad = await http.get(f"{BASE}/workflows/not-a-uuid")
    assert page.status_code == 200 and by_step.status_code == 200
    assert (missing.status_code, bad.status_code) == (404, 404)
    assert f'href="{BASE}/workflows/{handle.workflow_id}"' in job_page
    assert "workflow-link" not in plain_page
    html = page.text
    assert "<img src=x" not in html and "&lt;img src=x onerror=" in html  # table and tooltip
    svg = _svg(html)
    nodes = svg.findall(f"{SVG}a")
    states = {n.get("data-id"): n.get("data-state") for n in nodes}
    assert states == {ids[0]: "pending", ids[1]: "cancelled", ids[2]: "failed", ids[3]: "failed"}
    for node in nodes:
        rect = node.find(f"{SVG}rect")
        assert rect is not None and rect.get("fill") == STATE_COLOURS[str(node.get("data-state"))]
        assert node.get("href") == f"{BASE}/jobs/{node.get('data-id')}"
    tip = next(n for n in nodes if n.get("data-id") == ids[3]).find(f"{SVG}title")
    assert tip is not None and XSS_ERROR in str(tip.text)  # escaped in the markup, whole here
    edges = {(e.get("data-parent"), e.get("data-child")) for e in svg.iter(f"{SVG}path")}
    edges.discard((None, None))  # the arrow head's path
    assert edges == {(ids[0], ids[2]), (ids[1], ids[2]), (ids[2], ids[3])}
    x = {n.get("data-id"): _x(n) for n in nodes}
    assert x[ids[0]] == x[ids[1]] < x[ids[2]] < x[ids[3]]  # a column per depth


def _x(node: ET.Element) -> float:
    rect = node.find(f"{SVG}rect")
    assert rect is not None
    return float(rect.get("x", "nan"))


async def test_the_workflow_page_cancels_the_workflow(
    store: PgDashboardStore, database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        flow = chain(Count(text="ab"), Double.from_count)
        handle = await producer.enqueue_workflow(flow)
        async with client(dashboard(store)) as http:
            await sign_in(http, ADMIN_KEY)
            page = (await http.get(f"{BASE}/workflows/{handle.workflow_id}")).text
            assert 'data-action="cancel-workflow"' in page
            csrf = csrf_of(page)
            form = {"id": str(handle.workflow_id), "csrf": csrf, "back": f"{BASE}/"}
            confirm = await http.post(f"{BASE}/actions/cancel-workflow", data=form)
            assert "Cancel the workflow" in confirm.text
            done = await http.post(
                f"{BASE}/actions/cancel-workflow", data={**form, "confirm": "yes"}
            )
            shown = (await http.get(done.headers["location"])).text
            after = (await http.get(f"{BASE}/workflows/{handle.workflow_id}")).text
        assert "Cancelled the workflow: 2 step(s)" in shown
        assert 'data-action="cancel-workflow"' not in after  # nothing left to cancel
        info = await producer.workflow(handle)
        assert info is not None and [s.state for s in info.steps] == ["cancelled", "cancelled"]
    audit = sql.SQL("SELECT actor, action, filter, count FROM {}").format(
        sql.Identifier(pg_schema, "queue_message_audit")
    )
    rows = await execute(database_url, audit)
    assert [tuple(r[1:]) for r in rows] == [
        ("cancel workflow", f"workflow {handle.workflow_id}", 2)
    ]
