"""Setting a queue's flow limits from the dashboard (httpx in process, real PostgreSQL): the
confirmation names them, the change is stored where every worker's claim reads it, shown on the
overview with who set it, audited old -> new, and a spelling that does not parse is a 400
naming it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from queuey.backends.postgres import PgDashboardStore
from tests.integration.postgres.dashboard_helpers import ADMIN_KEY, BASE, client, dashboard, seed

pytestmark = pytest.mark.postgres

HEADERS = {"X-Api-Key": ADMIN_KEY}


@pytest.fixture
async def store(database_url: str, pg_schema: str) -> AsyncIterator[PgDashboardStore]:
    async with PgDashboardStore(database_url, schema=pg_schema, topic_channel="shop_queue") as s:
        yield s


async def test_limits_set_from_the_dashboard_are_stored_shown_and_audited(
    store: PgDashboardStore, database_url: str, pg_schema: str
) -> None:
    await seed(database_url, pg_schema)
    form = {"kind": "job", "queue": "emails", "limits": "rate 14/1s\nconcurrency 3 by tenant"}
    async with client(dashboard(store)) as http:
        confirm = await http.post(f"{BASE}/actions/limits", data=form, headers=HEADERS)
        done = await http.post(
            f"{BASE}/actions/limits", data=form | {"confirm": "yes"}, headers=HEADERS
        )
        overview = await http.get(f"{BASE}/", headers=HEADERS)
        back = {"kind": "job", "queue": "emails", "limits": "declared", "confirm": "yes"}
        await http.post(f"{BASE}/actions/limits", data=back, headers=HEADERS)
    assert "Set the flow limits of job <code>emails</code>" in confirm.text
    assert done.is_redirect
    assert "limits: <code>rate 14/1s; concurrency 3 by tenant</code> (set by admin-bot)" in (
        overview.text
    )
    assert await store.limits_set() == []  # back to the declared limits
    entries = [e for e in await store.audit() if e.action == "set limits"]
    assert [(e.actor, e.filter) for e in reversed(entries)] == [
        ("admin-bot", "declared -> rate 14/1s; concurrency 3 by tenant"),
        ("admin-bot", "rate 14/1s; concurrency 3 by tenant -> declared"),
    ]


async def test_a_limit_that_does_not_parse_is_refused(store: PgDashboardStore) -> None:
    form = {"kind": "job", "queue": "emails", "limits": "rate 14", "confirm": "yes"}
    async with client(dashboard(store)) as http:
        answer = await http.post(f"{BASE}/actions/limits", data=form, headers=HEADERS)
        app = {"kind": "app", "queue": "shop", "limits": "concurrency 1", "confirm": "yes"}
        on_app = await http.post(f"{BASE}/actions/limits", data=app, headers=HEADERS)
    assert answer.status_code == 400 and "&#39;rate 14&#39; is not a limit" in answer.text
    assert on_app.status_code == 400
    assert await store.limits_set() == []
