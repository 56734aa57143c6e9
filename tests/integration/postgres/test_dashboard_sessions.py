"""Dashboard sessions end with their credentials, bulk actions act on what they showed, and a
status message cannot be forged: over HTTP (httpx in process) on a real PostgreSQL.

Two dashboard apps built from the same ``[dashboard] secret`` over one database stand for two
processes (or one process before and after a restart with another configuration).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from psycopg import sql

from queuey.backends.postgres import PgDashboardStore
from queuey.dashboard import DashboardConfig, dashboard_mount
from queuey.http import AccessPolicy, ApiKeyConfig, HttpConfig, JwtConfig, publish_app
from queuey.http import api_key_digest as digest
from tests.integration.postgres.dashboard_helpers import (
    ADMIN_KEY,
    BASE,
    client,
    csrf_of,
    execute,
    seed,
    sign_in,
    status_of,
)
from tests.unit.http.http_fakes import AUDIENCE, OPS_KEY, SECRET, RecordingPublisher, token

pytestmark = pytest.mark.postgres

SESSION_SECRET = "dashboard-session-secret-0123456789abcdef"
ROTATED_JWT_SECRET = "another-jwt-secret-another-jwt-secret!"


@pytest.fixture
async def store(database_url: str, pg_schema: str) -> AsyncIterator[PgDashboardStore]:
    async with PgDashboardStore(database_url, schema=pg_schema, topic_channel="shop_queue") as s:
        yield s


@pytest.fixture
async def ids(database_url: str, pg_schema: str) -> dict[str, str]:
    return await seed(database_url, pg_schema)


def keys(admin_roles: frozenset[str] | None = frozenset({"admin"})) -> tuple[ApiKeyConfig, ...]:
    """The viewer key, and the admin key with ``admin_roles`` (``None``: removed)."""
    viewer = ApiKeyConfig(id="ops-bot", sha256=digest(OPS_KEY), roles=frozenset({"ops"}))
    if admin_roles is None:
        return (viewer,)
    return (viewer, ApiKeyConfig(id="admin-bot", sha256=digest(ADMIN_KEY), roles=admin_roles))


def served(
    store: PgDashboardStore, api_keys: tuple[ApiKeyConfig, ...], jwt_secret: str = SECRET
) -> Any:
    """One process's dashboard: the same session secret, these keys and this JWT secret."""
    http = HttpConfig(
        base="/api", jwt=JwtConfig(audience=AUDIENCE, secret=jwt_secret), api_keys=api_keys
    )
    config = DashboardConfig(
        view=AccessPolicy.parse("role:ops"),
        act=AccessPolicy.parse("role:admin"),
        secret=SESSION_SECRET,
    )
    mount = dashboard_mount(config, store, http, app_prefix="shop")
    return publish_app(http, RecordingPublisher(), AccessPolicy.parse("private"), mounts=[mount])


async def signed_in(app: Any, credential: str) -> tuple[str, str]:
    """Sign in on ``app``: the session cookie's value and the page's CSRF token."""
    async with client(app) as http:
        assert (await sign_in(http, credential)).status_code == 303
        page = await http.get(f"{BASE}/")
        return http.cookies["queuey_dashboard"], csrf_of(page.text)


async def replay(app: Any, cookie: str, path: str, form: dict[str, str] | None = None) -> Any:
    """A request carrying ``cookie`` only (a browser replaying it)."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://localhost",
        headers={"Cookie": f"queuey_dashboard={cookie}"},
    ) as http:
        if form is None:
            return await http.get(BASE + path)
        return await http.post(BASE + path, data=form)


async def test_signing_out_ends_the_session_in_every_process(
    store: PgDashboardStore, ids: dict[str, str], database_url: str, pg_schema: str
) -> None:
    one, other = served(store, keys()), served(store, keys())
    cookie, csrf = await signed_in(one, ADMIN_KEY)
    still = await replay(other, cookie, "/")
    out = await replay(one, cookie, "/logout", {"csrf": csrf})
    retry = {"id": ids["failed"], "csrf": csrf, "confirm": "yes"}
    replays = [await replay(app, cookie, "/actions/retry", retry) for app in (one, other)] + [
        await replay(app, cookie, "/") for app in (one, other)
    ]
    assert still.status_code == 200 and "admin-bot" in still.text
    assert out.status_code == 303
    assert [r.status_code for r in replays] == [401, 401, 303, 303]
    assert all(r.headers["location"].startswith(f"{BASE}/login") for r in replays[2:])
    assert await status_of(database_url, pg_schema, ids["failed"]) == "failed"
    assert await store.audit() == []


async def test_removing_a_key_or_a_role_ends_its_sessions_on_the_next_request(
    store: PgDashboardStore, ids: dict[str, str], database_url: str, pg_schema: str
) -> None:
    cookie, csrf = await signed_in(served(store, keys()), ADMIN_KEY)
    discard = {"id": ids["failed"], "csrf": csrf, "confirm": "yes"}
    removed, demoted = served(store, keys(None)), served(store, keys(frozenset({"ops"})))
    promoted = served(store, keys(frozenset({"admin", "ops"})))
    answers = [
        await replay(removed, cookie, "/actions/discard", discard),
        await replay(demoted, cookie, "/actions/discard", discard),
        await replay(promoted, cookie, "/actions/discard", discard),
        await replay(demoted, cookie, "/"),
    ]
    kept = await replay(served(store, keys()), cookie, "/")
    assert [a.status_code for a in answers] == [401, 401, 401, 303]
    assert await status_of(database_url, pg_schema, ids["failed"]) == "failed"
    assert await store.audit() == []
    assert kept.status_code == 200 and "admin-bot" in kept.text
    async with client(demoted) as http:  # signing in again gives the key's rights now
        await sign_in(http, ADMIN_KEY)
        again = await http.get(f"{BASE}/jobs/{ids['failed']}")
    assert again.status_code == 200 and "data-action" not in again.text


async def test_a_new_token_key_ends_the_sessions_its_tokens_opened(
    store: PgDashboardStore,
) -> None:
    cookie, _ = await signed_in(served(store, keys()), token(sub="olga", roles=["ops"]))
    same = await replay(served(store, keys()), cookie, "/")
    rotated = await replay(served(store, keys(), jwt_secret=ROTATED_JWT_SECRET), cookie, "/")
    assert same.status_code == 200 and "olga" in same.text
    assert rotated.status_code == 303 and "/login" in rotated.headers["location"]


async def bulk_confirmation(http: httpx.AsyncClient, action: str, csrf: str) -> httpx.Response:
    form = {"status": "failed", "kind": "job", "queue": "emails", "csrf": csrf}
    return await http.post(f"{BASE}/actions/{action}", data=form)


def confirmation_form(page: str) -> dict[str, str]:
    """The hidden fields of a confirmation page's form."""
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page))


async def add_failed(url: str, schema: str, queue: str = "emails") -> str:
    table = sql.Identifier(schema, "queue_message")
    found = await execute(
        url,
        sql.SQL(
            "INSERT INTO {} (id, kind, queue, job_type, status, payload, error, processed_at) "
            "VALUES (gen_random_uuid(), 'job', %s, 'app.SendEmail', 'failed', '{{}}', 'late', "
            "now()) RETURNING id::text"
        ).format(table),
        [queue],
    )
    return str(found[0][0])


@pytest.mark.parametrize("action", ["bulk-discard", "bulk-retry"])
async def test_a_bulk_action_acts_on_exactly_the_jobs_its_confirmation_counted(
    store: PgDashboardStore, ids: dict[str, str], database_url: str, pg_schema: str, action: str
) -> None:
    async with client(served(store, keys())) as http:
        await sign_in(http, ADMIN_KEY)
        csrf = csrf_of((await http.get(f"{BASE}/")).text)
        asked = await bulk_confirmation(http, action, csrf)
        late = await add_failed(database_url, pg_schema)  # matches, but after the page
        form = confirmation_form(asked.text)
        done = await http.post(f"{BASE}/actions/{action}", data=form)
        again = await http.post(f"{BASE}/actions/{action}", data=form)
        shown = await http.get(done.headers["location"])
    count = re.search(r'id="confirm-count">(\d+)<', asked.text)
    assert count is not None and count.group(1) == "2"  # "xss" and "failed" in emails
    assert done.status_code == 303 and again.status_code == 409
    assert "already used" in again.text
    assert await status_of(database_url, pg_schema, late) == "failed"
    gone = None if action == "bulk-discard" else "pending"
    assert await status_of(database_url, pg_schema, ids["failed"]) == gone
    assert await status_of(database_url, pg_schema, ids["xss"]) == gone
    assert re.search(r"(Discarded|Retried) 2 failed job", shown.text)
    [entry] = await store.audit()
    assert entry.count == 2


async def test_a_bulk_confirmation_is_its_actor_s_own_and_needs_its_token(
    store: PgDashboardStore, ids: dict[str, str], database_url: str, pg_schema: str
) -> None:
    admin2 = ApiKeyConfig(
        id="admin-2", sha256=digest("qk_admin_two_0123456789"), roles=frozenset({"admin"})
    )
    app = served(store, (*keys(), admin2))
    async with client(app) as http:
        await sign_in(http, ADMIN_KEY)
        csrf = csrf_of((await http.get(f"{BASE}/")).text)
        form = confirmation_form((await bulk_confirmation(http, "bulk-discard", csrf)).text)
        headers = {"X-Api-Key": "qk_admin_two_0123456789"}
        stolen = await http.post(f"{BASE}/actions/bulk-discard", data=form, headers=headers)
        missing = await http.post(f"{BASE}/actions/bulk-discard", data={**form, "confirmation": ""})
    assert stolen.status_code == 409 and missing.status_code == 400
    assert await status_of(database_url, pg_schema, ids["failed"]) == "failed"


async def test_a_status_message_cannot_be_forged_through_the_query_string(
    store: PgDashboardStore, ids: dict[str, str]
) -> None:
    app = served(store, keys())
    async with client(app) as http:
        await sign_in(http, ADMIN_KEY)
        forged = [
            await http.get(f"{BASE}/?did=discard&n=987654"),
            await http.get(f"{BASE}/jobs?status=failed&did=bulk-discard&n=5"),
            await http.get(f"{BASE}/?done=eyJkaWQiOiJkaXNjYXJkIiwibiI6OTg3NjU0fQ.AAAA"),
        ]
        csrf = csrf_of(forged[0].text)
        acted = await http.post(
            f"{BASE}/actions/retry", data={"id": ids["failed"], "csrf": csrf, "confirm": "yes"}
        )
        shown = await http.get(acted.headers["location"])
    signed = acted.headers["location"].split("done=")[1]
    async with client(served(store, keys())) as other:  # the same secret reads it too
        await sign_in(other, OPS_KEY)
        elsewhere = await other.get(f"{BASE}/?done={signed}")
    assert all(page.status_code == 200 for page in forged)
    assert all('role="status"' not in page.text for page in forged)
    assert all("Discarded" not in page.text for page in forged)
    assert "Retried 1 job(s)" in shown.text and "Retried 1 job(s)" in elsewhere.text
