"""The dashboard through its routes (httpx in process) on a real PostgreSQL: access, sessions,
pages, escaping, CSRF and the audited actions."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from queuey.backends.postgres import PgDashboardStore
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
from tests.unit.http.http_fakes import OPS_KEY, bearer, token

pytestmark = pytest.mark.postgres


@pytest.fixture
async def store(database_url: str, pg_schema: str) -> AsyncIterator[PgDashboardStore]:
    async with PgDashboardStore(database_url, schema=pg_schema, topic_channel="shop_queue") as s:
        yield s


@pytest.fixture
async def ids(database_url: str, pg_schema: str) -> dict[str, str]:
    return await seed(database_url, pg_schema)


async def test_private_by_default_every_path_is_404(store: PgDashboardStore) -> None:
    async with client(dashboard(store, view="private", act="private")) as http:
        answers = [
            await http.get(f"{BASE}/"),
            await http.get(f"{BASE}/login"),
            await http.get(f"{BASE}/static/dashboard.css"),
            await http.get(f"{BASE}/", headers={"X-Api-Key": ADMIN_KEY}),
            await http.post(f"{BASE}/actions/retry", data={"confirm": "yes"}),
        ]
    assert [a.status_code for a in answers] == [404] * 5
    assert all("dashboard" not in a.text.lower() for a in answers)


async def test_a_browser_without_a_session_is_sent_to_sign_in(store: PgDashboardStore) -> None:
    async with client(dashboard(store)) as http:
        page = await http.get(f"{BASE}/jobs?status=failed")
    assert page.status_code == 303
    assert (
        page.headers["location"] == f"{BASE}/login?next=%2Fapi%2Fdashboard%2Fjobs%3Fstatus%3Dfailed"
    )


async def test_signing_in_sets_a_strict_http_only_cookie_without_the_key(
    store: PgDashboardStore,
) -> None:
    async with client(dashboard(store)) as http:
        signed = await sign_in(http, ADMIN_KEY)
        cookie = signed.headers["set-cookie"]
        overview = await http.get(f"{BASE}/")
    assert signed.status_code == 303 and signed.headers["location"] == f"{BASE}/"
    assert "queuey_dashboard=" in cookie and ADMIN_KEY not in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert f"Path={BASE}" in cookie
    assert overview.status_code == 200 and "admin-bot" in overview.text


async def test_a_wrong_key_or_a_stale_form_does_not_sign_in(store: PgDashboardStore) -> None:
    async with client(dashboard(store)) as http:
        wrong = await sign_in(http, "qk_nobody")
        stale = await http.post(f"{BASE}/login", data={"credential": ADMIN_KEY, "token": "x"})
        after = await http.get(f"{BASE}/")
    assert wrong.status_code == 401 and "was not accepted" in wrong.text
    assert "qk_nobody" not in wrong.text and "queuey_dashboard=" not in str(wrong.headers)
    assert stale.status_code == 403
    assert after.status_code == 303


async def test_a_bearer_token_signs_in_and_a_member_is_refused(store: PgDashboardStore) -> None:
    async with client(dashboard(store)) as http:
        member = await sign_in(http, token(sub="mo", roles=["member"]))
        ops = await sign_in(http, token(sub="olga", roles=["ops"]))
        page = await http.get(f"{BASE}/")
    assert member.status_code == 401 and "may not view" in member.text
    assert ops.status_code == 303 and "olga" in page.text


async def test_every_page_renders(store: PgDashboardStore, ids: dict[str, str]) -> None:
    pages = [
        "/", "/jobs?status=failed", "/jobs?status=pending&kind=job&queue=emails",
        "/jobs?status=done&q=nothing", "/jobs?status=scheduled", f"/jobs/{ids['failed']}",
        f"/jobs/{ids['notify']}", "/topics", "/topics/order.paid", "/audit", "/schedules",
        "/unique-keys", "/static/dashboard.css", "/static/dashboard.js",
    ]  # fmt: skip
    async with client(dashboard(store)) as http:
        await sign_in(http, ADMIN_KEY)
        answers = {page: await http.get(BASE + page) for page in pages}
    assert {page: a.status_code for page, a in answers.items()} == dict.fromkeys(pages, 200)
    overview = answers["/"].text
    assert "emails" in overview and "reports" in overview and "<svg" in overview
    assert ids["failed"][:8] in answers["/jobs?status=failed"].text
    assert ids["pending"][:8] in answers["/jobs?status=pending&kind=job&queue=emails"].text
    fan_out = answers[f"/jobs/{ids['notify']}"].text
    assert "fulfil_order" in fan_out and "notify_ops" in fan_out
    assert "fulfil_order" in answers["/topics/order.paid"].text


async def test_payloads_and_errors_are_shown_as_text(
    store: PgDashboardStore, ids: dict[str, str]
) -> None:
    async with client(dashboard(store)) as http:
        await sign_in(http, ADMIN_KEY)
        job = await http.get(f"{BASE}/jobs/{ids['xss']}")
        listing = await http.get(f"{BASE}/jobs?status=failed&q=script")
    for page in (job, listing):
        assert "<script>alert" not in page.text and "<img src=x" not in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "&lt;script&gt;alert(&#39;payload&#39;)&lt;/script&gt;" in job.text
    assert "&lt;img src=x onerror=alert(&#39;error&#39;)&gt;" in job.text


async def test_an_action_needs_the_session_csrf_token(
    store: PgDashboardStore, ids: dict[str, str], database_url: str, pg_schema: str
) -> None:
    async with client(dashboard(store)) as http:
        await sign_in(http, ADMIN_KEY)
        page = await http.get(f"{BASE}/jobs/{ids['failed']}")
        form = {"id": ids["failed"], "confirm": "yes"}
        missing = await http.post(f"{BASE}/actions/retry", data=form)
        forged = await http.post(f"{BASE}/actions/retry", data={**form, "csrf": "forged"})
        assert await status_of(database_url, pg_schema, ids["failed"]) == "failed"
        done = await http.post(f"{BASE}/actions/retry", data={**form, "csrf": csrf_of(page.text)})
    assert (missing.status_code, forged.status_code, done.status_code) == (403, 403, 303)
    assert await status_of(database_url, pg_schema, ids["failed"]) == "pending"
    assert [(e.actor, e.action, e.job_id, e.count) for e in await store.audit()] == [
        ("admin-bot", "retry", ids["failed"], 1)
    ]


async def test_an_action_asks_for_confirmation_first(
    store: PgDashboardStore, ids: dict[str, str], database_url: str, pg_schema: str
) -> None:
    async with client(dashboard(store)) as http:
        await sign_in(http, ADMIN_KEY)
        csrf = csrf_of((await http.get(f"{BASE}/")).text)
        asked = await http.post(f"{BASE}/actions/discard", data={"id": ids["xss"], "csrf": csrf})
        assert await status_of(database_url, pg_schema, ids["xss"]) == "failed"
        confirmed = await http.post(
            f"{BASE}/actions/discard", data={"id": ids["xss"], "csrf": csrf, "confirm": "yes"}
        )
        shown = await http.get(confirmed.headers["location"])
    assert asked.status_code == 200 and 'id="confirm"' in asked.text
    assert await status_of(database_url, pg_schema, ids["xss"]) is None
    assert "Discarded 1 job(s)." in shown.text


async def test_a_viewer_sees_no_actions_and_is_refused_one(
    store: PgDashboardStore, ids: dict[str, str], database_url: str, pg_schema: str
) -> None:
    async with client(dashboard(store)) as http:
        await sign_in(http, OPS_KEY)
        pages = [await http.get(BASE + p) for p in ("/", f"/jobs/{ids['failed']}", "/jobs")]
        csrf = csrf_of(pages[0].text)
        refused = await http.post(
            f"{BASE}/actions/retry", data={"id": ids["failed"], "csrf": csrf, "confirm": "yes"}
        )
    assert all(p.status_code == 200 and "data-action" not in p.text for p in pages)
    assert refused.status_code == 403
    assert await status_of(database_url, pg_schema, ids["failed"]) == "failed"
    assert await store.audit() == []


async def test_bulk_retry_acts_on_the_filter_only(
    store: PgDashboardStore, ids: dict[str, str], database_url: str, pg_schema: str
) -> None:
    form = {"status": "failed", "kind": "job", "queue": "emails", "q": "boom"}
    headers = {"X-Api-Key": ADMIN_KEY}
    async with client(dashboard(store)) as http:
        asked = await http.post(f"{BASE}/actions/bulk-retry", data=form, headers=headers)
        token = re.search(r'name="confirmation" value="([^"]+)"', asked.text)
        assert token is not None
        form |= {"confirm": "yes", "confirmation": token.group(1)}
        answer = await http.post(f"{BASE}/actions/bulk-retry", data=form, headers=headers)
    assert answer.status_code == 303
    statuses = {name: await status_of(database_url, pg_schema, i) for name, i in ids.items()}
    assert statuses["failed"] == "pending"
    assert statuses["xss"] == statuses["other"] == statuses["notify"] == "failed"
    [entry] = await store.audit()
    assert (entry.action, entry.queue, entry.filter, entry.count) == (
        "bulk retry", "emails", "failed job:emails text='boom'", 1,
    )  # fmt: skip


async def test_pause_and_resume_a_queue_and_the_app(store: PgDashboardStore) -> None:
    headers = {"X-Api-Key": ADMIN_KEY}
    async with client(dashboard(store)) as http:
        for action, kind, queue in [("pause", "job", "emails"), ("pause", "app", "shop")]:
            form = {"kind": kind, "queue": queue, "confirm": "yes"}
            assert (
                await http.post(f"{BASE}/actions/{action}", data=form, headers=headers)
            ).is_redirect
        overview = await http.get(f"{BASE}/", headers=headers)
        form = {"kind": "job", "queue": "emails", "confirm": "yes"}
        await http.post(f"{BASE}/actions/resume", data=form, headers=headers)
    assert "Resume app" in overview.text and overview.text.count("badge paused") == 2
    assert [(p.kind, p.queue) for p in await store.paused()] == [("app", "shop")]
    assert [e.action for e in await store.audit()] == ["resume", "pause", "pause"]


async def test_a_header_credential_is_checked_like_the_endpoint(store: PgDashboardStore) -> None:
    async with client(dashboard(store)) as http:
        invalid = await http.get(f"{BASE}/", headers={"X-Api-Key": "qk_wrong"})
        member = await http.get(f"{BASE}/", headers=bearer(token(roles=["member"])))
        viewer = await http.get(f"{BASE}/", headers={"X-Api-Key": OPS_KEY})
    assert (invalid.status_code, member.status_code, viewer.status_code) == (401, 403, 200)


async def test_the_list_index_leaves_pending_rows_to_the_claim(
    database_url: str, pg_schema: str
) -> None:
    """An index the claim could use instead of its own would be picked when statistics are
    stale, sorting the whole backlog on every claim: the dashboard's skips pending rows."""
    found = await execute(
        database_url,
        "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = %s",
        [pg_schema, "queue_message_dashboard"],
    )
    assert found[0][0].endswith("(kind, queue, status, seq) WHERE (status <> 'pending'::text)")


async def test_a_list_pages_by_keyset_and_a_filter_says_how_far_it_read(
    store: PgDashboardStore, database_url: str, pg_schema: str
) -> None:
    await execute(
        database_url,
        f'INSERT INTO "{pg_schema}".queue_message (id, kind, queue, job_type, status, payload, '
        "error, processed_at) SELECT gen_random_uuid(), 'job', 'bulk', 'app.Job', 'failed', "
        "json_build_object('n', i), CASE WHEN i = 1 THEN 'needle' ELSE 'hay' END, now() "
        "FROM generate_series(1, 2120) AS i",
    )
    headers = {"X-Api-Key": ADMIN_KEY}
    seen: list[str] = []
    url: str | None = f"{BASE}/jobs?status=failed&kind=job&queue=bulk"
    async with client(dashboard(store)) as http:
        while url is not None and len(seen) < 200:
            page = await http.get(url, headers=headers)
            seen.extend(re.findall(r'href="/api/dashboard/jobs/([0-9a-f-]{36})"', page.text))
            older = re.search(r'href="(/api/dashboard/jobs\?[^"]*before=\d+[^"]*)"', page.text)
            url = older.group(1).replace("&amp;", "&") if older else None
        filtered = await http.get(f"{BASE}/jobs?status=failed&q=needle", headers=headers)
        more = re.search(r'href="(/api/dashboard/jobs\?[^"]*before=\d+[^"]*)"', filtered.text)
        assert more is not None  # the first read stopped at the budget: it links onwards
        found = await http.get(more.group(1).replace("&amp;", "&"), headers=headers)
    assert len(seen) == 200 and len(set(seen)) == 200  # four pages of 50, no repeats
    assert "older rows may match too" in filtered.text
    assert '<td class="error">needle</td>' not in filtered.text
    assert '<td class="error">needle</td>' in found.text


async def test_cancel_a_pending_job_then_retry_it(
    store: PgDashboardStore, ids: dict[str, str], database_url: str, pg_schema: str
) -> None:
    async with client(dashboard(store)) as http:
        await sign_in(http, ADMIN_KEY)
        page = await http.get(f"{BASE}/jobs/{ids['pending']}")
        form = {"id": ids["pending"], "csrf": csrf_of(page.text), "confirm": "yes"}
        cancelled = await http.post(f"{BASE}/actions/cancel", data=form)
        status_after_cancel = await status_of(database_url, pg_schema, ids["pending"])
        listed = await http.get(f"{BASE}/jobs?status=cancelled")
        again = await http.post(f"{BASE}/actions/cancel", data=form)
        retried = await http.post(f"{BASE}/actions/retry", data=form)
    assert 'data-action="cancel"' in page.text
    assert (cancelled.status_code, again.status_code, retried.status_code) == (303, 303, 303)
    assert status_after_cancel == "cancelled" and ids["pending"] in listed.text
    assert await status_of(database_url, pg_schema, ids["pending"]) == "pending"
    assert [(e.action, e.job_id, e.count) for e in await store.audit()] == [
        ("retry", ids["pending"], 1),
        ("cancel", ids["pending"], 0),
        ("cancel", ids["pending"], 1),
    ]


async def test_a_viewer_cannot_cancel(
    store: PgDashboardStore, ids: dict[str, str], database_url: str, pg_schema: str
) -> None:
    async with client(dashboard(store)) as http:
        await sign_in(http, OPS_KEY)
        page = await http.get(f"{BASE}/jobs/{ids['pending']}")
        refused = await http.post(
            f"{BASE}/actions/cancel",
            data={"id": ids["pending"], "csrf": csrf_of(page.text), "confirm": "yes"},
        )
    assert "data-action" not in page.text and refused.status_code == 403
    assert await status_of(database_url, pg_schema, ids["pending"]) == "pending"


async def test_the_job_page_shows_progress_and_result(
    store: PgDashboardStore, ids: dict[str, str], database_url: str, pg_schema: str
) -> None:
    import psycopg
    from psycopg import sql

    query = sql.SQL("UPDATE {} SET progress = %s::jsonb, result = %s::json WHERE id = %s").format(
        sql.Identifier(pg_schema, "queue_message")
    )
    progress = '{"fraction": 0.4, "done": 4, "total": 10, "note": "<b>rows</b>"}'
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(query, (progress, '{"sum": 3}', ids["failed"]))
    async with client(dashboard(store)) as http:
        await sign_in(http, ADMIN_KEY)
        page = await http.get(f"{BASE}/jobs/{ids['failed']}")
    assert page.status_code == 200
    assert '<progress max="1" value="0.4"></progress> 40% (4/10): &lt;b&gt;rows&lt;/b&gt;' in (
        page.text
    )
    assert "sum" in page.text.split('<pre class="json" id="result">')[1].split("</pre>")[0]
