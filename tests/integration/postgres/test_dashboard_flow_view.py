"""The dashboard's Flow limits page on a real PostgreSQL: per queue the limits in force and
where they come from (declared by a worker, or set at run time), and per limit and key what they
hold back now and why: jobs waiting, running against a cap, and when a rate limit's pace allows
the next start; server-rendered."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from queuey import Concurrency, Queue, QueueSet, RateLimit
from queuey.backends.postgres import Admin, PgDashboardStore, PostgresBackend
from queuey.envelope import Envelope
from queuey.limits import parse_limit
from tests.integration.postgres.dashboard_helpers import ADMIN_KEY, BASE, client, dashboard

pytestmark = pytest.mark.postgres


class ViewQueues(QueueSet, prefix="fv"):
    capped = Queue(prefetch=8, limits=[Concurrency(1, by="tenant")])
    paced = Queue(prefetch=8, limits=[RateLimit(1, per="1h", by="tenant")])
    plain = Queue(prefetch=8)


@pytest.fixture
async def backend(database_url: str, pg_schema: str) -> AsyncIterator[PostgresBackend]:
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="30s") as pg:
        yield pg


async def hold(backend: PostgresBackend, queue: Queue, tenants: list[str]) -> Any:
    """Publish one job per entry of ``tenants`` and claim what the limits let start (running,
    never settled); returns the consumer holding them."""
    config = queue.config
    await backend.publish([Envelope.new("fv.Job", config.name, {"tenant": t}) for t in tenants])
    consumer = backend.consumer(config)
    claimed = [await consumer.next()]
    assert claimed[0] is not None
    return consumer


async def test_the_flow_limits_page_shows_what_each_limit_holds_back_and_why(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    await backend.declare([q.config for q in ViewQueues.all()])  # records the declared limits
    capped = await hold(backend, ViewQueues.capped, ["a", "a", "a", "b"])
    paced = await hold(backend, ViewQueues.paced, ["z", "z"])
    admin = Admin(database_url, schema=pg_schema, actor="ops:ann")
    await admin.set_limits("fv.plain", [parse_limit("concurrency 2")])
    async with PgDashboardStore(database_url, schema=pg_schema) as store:
        views = {view.queue: view for view in await store.flow_view()}
        async with client(dashboard(store)) as http:
            page = await http.get(f"{BASE}/limits", headers={"X-Api-Key": ADMIN_KEY})
    await capped.stop()
    await paced.stop()

    assert set(views) == {"fv.capped", "fv.paced", "fv.plain"}
    a = [k for k in views["fv.capped"].keys if k.key == '["a"]']
    assert [(k.waiting, k.running, k.cap, k.room, k.held) for k in a] == [(2, 1, 1, 0, 2)]
    assert views["fv.capped"].source == "declared" and views["fv.capped"].held == 2
    (z,) = views["fv.paced"].keys
    assert (z.key, z.waiting, z.held, z.capped) == ('["z"]', 1, 1, False)
    assert z.next_in is not None and 3500 < z.next_in <= 3600  # one start per hour
    assert views["fv.plain"].source == "set" and views["fv.plain"].shown == "concurrency 2"

    assert page.status_code == 200
    text = re.sub(r"\s+", " ", page.text)
    assert "job <code>fv.capped</code>" in text and "2 due job(s) held back now" in text
    assert "declared by the workers" in text and "set at run time" in text
    assert "<code>concurrency 1 by tenant</code>" in text
    assert "1 / 1" in text and "when one of its 1 running job(s) ends" in text
    assert re.search(r"in 3[56]\d\d\.\d\ds \(its pace\)", text)
    assert "&#34;a&#34;" in text or "[&#34;a&#34;]" in text or '["a"]' in text


async def test_a_paused_queue_says_its_jobs_wait_for_the_resume(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    await backend.declare([ViewQueues.capped.config])
    config = ViewQueues.capped.config
    await backend.publish([Envelope.new("fv.Job", config.name, {"tenant": "a"})])
    await Admin(database_url, schema=pg_schema).pause_queue(config.name)
    async with PgDashboardStore(database_url, schema=pg_schema) as store:
        (view,) = await store.flow_view()
        async with client(dashboard(store)) as http:
            page = await http.get(f"{BASE}/limits", headers={"X-Api-Key": ADMIN_KEY})
    assert view.paused and view.keys == ()
    assert "every due job of this queue waits for the resume" in page.text
