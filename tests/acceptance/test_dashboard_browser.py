"""The dashboard in a real browser (Playwright on Debian's chromium) against ``queuey run
--http`` on a real PostgreSQL: sign in with an API key, open every page, retry a failed job
and see it run, pause a queue and see nothing claimed, and a viewer without actions.

Skips when chromium or Playwright is missing, except under ``CI=true`` where it fails
(``scripts/browser`` installs chromium). With ``QUEUEY_SCREENSHOTS=docs`` the overview and a
job page are saved as ``docs/dashboard-overview.png`` and ``docs/dashboard-job.png``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.acceptance.dashboard_server import (
    ADMIN_KEY,
    VIEWER_KEY,
    Served,
    serve,
    write_app,
)
from tests.acceptance.http_process import ROOT
from tests.conftest import unavailable

pytestmark = pytest.mark.postgres

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str:
    """Debian's chromium (or ``QUEUEY_CHROMIUM``); skips, or fails under CI, when absent."""
    path = os.environ.get("QUEUEY_CHROMIUM") or shutil.which("chromium")
    if path is None:
        unavailable("chromium", FileNotFoundError("no chromium on PATH (run scripts/browser)"))
    assert path is not None
    return path


@pytest.fixture
def server(tmp_path: Path, database_url: str, pg_schema: str) -> Iterator[Served]:
    config = write_app(tmp_path)
    with serve(["run", "--http"], config, database_url, pg_schema, "/api/dashboard/login") as s:
        yield s


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    executable = chromium_path()
    try:
        from playwright.async_api import async_playwright
    except ImportError as exc:
        unavailable("Playwright", exc)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            await launched.close()


async def signed_in(browser: Any, server: Served, key: str) -> Any:
    """A page signed in with ``key`` through the sign-in form, on the overview."""
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    await page.goto(f"{server.dashboard}/")
    assert "/login" in page.url
    await page.fill("input[name=credential]", key)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{server.dashboard}/")
    return page


async def publish(server: Served, topic: str, payload: dict[str, Any]) -> str:
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{server.url}/api/queues/{topic}", json=payload, headers={"X-Api-Key": VIEWER_KEY}
        )
    assert answer.status_code == 202, answer.text
    message_id: str = answer.json()["id"]
    return message_id


async def row(database_url: str, schema: str, job_id: str) -> tuple[str, Any]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(
            f'SELECT status, claimed_at FROM "{schema}".queue_message WHERE id = %s', [job_id]
        )
        found = await cursor.fetchone()
    assert found is not None
    return found[0], found[1]


async def until_status(database_url: str, schema: str, job_id: str, status: str) -> None:
    async with asyncio.timeout(20):
        while (await row(database_url, schema, job_id))[0] != status:
            await asyncio.sleep(0.1)


def screenshot_path(name: str, tmp_path: Path) -> Path:
    folder = ROOT / "docs" if os.environ.get("QUEUEY_SCREENSHOTS") == "docs" else tmp_path
    return folder / name


async def test_sign_in_with_an_api_key_and_open_every_page(
    browser: Any, server: Served, database_url: str, tmp_path: Path
) -> None:
    await publish(server, "order.paid", {"order": 42, "note": "<script>alert(1)</script>"})
    for order in range(12):  # something to see on the overview
        await publish(server, "order.paid", {"order": order})
    for batch in range(2):
        await publish(server, "flaky.work", {"batch": batch})
    failed_id = await publish(server, "flaky.work", {"batch": 7})
    await until_status(database_url, server.schema, failed_id, "failed")
    page = await signed_in(browser, server, ADMIN_KEY)
    assert await page.locator("#queues").is_visible()
    assert await page.locator("svg.chart").is_visible()
    await page.screenshot(path=screenshot_path("dashboard-overview.png", tmp_path))
    for link, heading in [
        ("Jobs", "Jobs"), ("Topics", "Topics"), ("Schedules", "Schedules"),
        ("Unique keys", "Unique keys"), ("Audit log", "Audit log"), ("Overview", "Overview"),
    ]:  # fmt: skip
        await page.click(f"header nav >> text={link}")
        assert (await page.locator("h1").inner_text()).startswith(heading)
    await page.goto(f"{server.dashboard}/topics/order.paid")
    assert await page.locator("text=fulfil").count() >= 1
    await page.goto(f"{server.dashboard}/jobs/{failed_id}")
    assert "first try fails <b>on purpose</b>" in await page.locator("#error").inner_text()
    assert await page.locator("#payload").inner_text() == '{\n  "batch": 7\n}'
    attempt = page.locator("#attempt-errors li")
    assert await attempt.count() == 1  # max_attempts = 1: one failed attempt, kept in full
    assert "RuntimeError: flaky: first try fails" in await attempt.locator("pre.error").inner_text()
    await attempt.locator("summary").click()
    traceback = await attempt.locator("pre.traceback").inner_text()
    assert traceback.startswith("Traceback (most recent call last):") and "in flaky" in traceback
    await page.screenshot(path=screenshot_path("dashboard-job.png", tmp_path), full_page=True)


async def test_retry_a_failed_job_and_see_it_run(
    browser: Any, server: Served, database_url: str
) -> None:
    job_id = await publish(server, "flaky.work", {"batch": 8})
    await until_status(database_url, server.schema, job_id, "failed")
    page = await signed_in(browser, server, ADMIN_KEY)
    await page.goto(f"{server.dashboard}/jobs?status=failed")
    await page.click(f"a[href$='{job_id}']")
    await page.click("button[data-action=retry]")
    assert "Retry the job" in await page.locator("#confirm-text").inner_text()
    await page.click("#confirm")
    assert "Retried 1 job(s)" in await page.locator(".flash").inner_text()
    await until_status(database_url, server.schema, job_id, "done")
    await page.reload()
    assert await page.locator("h1 .status").inner_text() == "done"
    await page.goto(f"{server.dashboard}/audit")
    assert "admin-bot" in await page.locator("#audit").inner_text()


async def test_pause_a_queue_and_see_nothing_claimed(
    browser: Any, server: Served, database_url: str
) -> None:
    await publish(server, "order.paid", {"order": 1})  # the queue shows on the overview
    page = await signed_in(browser, server, ADMIN_KEY)
    await page.click("tr[data-queue='order.paid'] button[data-action=pause]")
    await page.click("#confirm")
    assert await page.locator("tr[data-queue='order.paid'] .badge.paused").is_visible()
    job_id = await publish(server, "order.paid", {"order": 2})
    await asyncio.sleep(2.5)  # two polls: a claim would have happened by now
    assert await row(database_url, server.schema, job_id) == ("pending", None)
    await page.click("tr[data-queue='order.paid'] button[data-action=resume]")
    await page.click("#confirm")
    await until_status(database_url, server.schema, job_id, "done")


async def test_a_viewer_has_no_actions(browser: Any, server: Served, database_url: str) -> None:
    job_id = await publish(server, "flaky.work", {"batch": 9})
    await until_status(database_url, server.schema, job_id, "failed")
    page = await signed_in(browser, server, VIEWER_KEY)
    for path in ["/", "/jobs?status=failed", f"/jobs/{job_id}", "/topics/order.paid"]:
        await page.goto(server.dashboard + path)
        assert await page.locator("[data-action]").count() == 0
    assert "(viewer)" in await page.locator("header .who").inner_text()
    csrf = await page.locator("input[name=csrf]").first.get_attribute("value")
    refused = await page.request.post(
        f"{server.dashboard}/actions/retry",
        form={"id": job_id, "csrf": csrf or "", "confirm": "yes"},
    )
    assert refused.status == 403
    assert (await row(database_url, server.schema, job_id))[0] == "failed"


async def replayed(browser: Any, cookies: list[dict[str, Any]], url: str) -> Any:
    """A fresh browser context holding ``cookies`` (a copied cookie jar), opened at ``url``."""
    context = await browser.new_context()
    await context.add_cookies(cookies)
    page = await context.new_page()
    await page.goto(url)
    return page


async def test_signing_out_ends_the_session_in_every_process(
    browser: Any, server: Served, database_url: str, tmp_path: Path
) -> None:
    job_id = await publish(server, "flaky.work", {"batch": 11})
    await until_status(database_url, server.schema, job_id, "failed")
    config = tmp_path / "app.toml"  # the same file, so the same [dashboard] secret
    with serve(["dashboard"], config, database_url, server.schema, "/api/dashboard/login") as b:
        page = await signed_in(browser, server, ADMIN_KEY)
        cookies = await page.context.cookies()
        csrf = await page.locator("input[name=csrf]").first.get_attribute("value")
        before = await replayed(browser, cookies, f"{b.dashboard}/")
        assert "admin-bot" in await before.locator("header .who").inner_text()
        await page.click("text=Sign out")
        await page.wait_for_url(f"{server.dashboard}/login")
        for where in (server, b):
            again = await replayed(browser, cookies, f"{where.dashboard}/")
            assert "/login" in again.url
            session = next(c["value"] for c in cookies if c["name"] == "queuey_dashboard")
            headers = {"Cookie": f"queuey_dashboard={session}"}
            async with httpx.AsyncClient(headers=headers) as http:
                refused = await http.post(
                    f"{where.dashboard}/actions/retry",
                    data={"id": job_id, "csrf": csrf or "", "confirm": "yes"},
                )
            assert refused.status_code == 401
    assert (await row(database_url, server.schema, job_id))[0] == "failed"


async def add_failed_job(database_url: str, schema: str) -> str:
    """A failed row of a typed-job queue nothing consumes; returns its id."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(
            f'INSERT INTO "{schema}".queue_message (id, kind, queue, job_type, status, payload,'
            " error, processed_at) VALUES (gen_random_uuid(), 'job', 'late', 'app.Late',"
            " 'failed', '{}', 'late failure', now()) RETURNING id::text"
        )
        found = await cursor.fetchone()
    assert found is not None
    return str(found[0])


async def test_a_bulk_discard_acts_on_exactly_the_jobs_it_counted(
    browser: Any, server: Served, database_url: str
) -> None:
    shown = [await publish(server, "flaky.work", {"batch": n}) for n in (20, 21)]
    for job_id in shown:
        await until_status(database_url, server.schema, job_id, "failed")
    page = await signed_in(browser, server, ADMIN_KEY)
    await page.goto(f"{server.dashboard}/jobs?status=failed")
    await page.click("button[data-action=bulk-discard]")
    assert await page.locator("#confirm-count").inner_text() == "2"
    late = await add_failed_job(database_url, server.schema)  # matches, after the page
    await page.click("#confirm")
    assert "Discarded 2 failed job(s)" in await page.locator(".flash").inner_text()
    assert (await row(database_url, server.schema, late))[0] == "failed"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(
            f'SELECT count(*) FROM "{server.schema}".queue_message WHERE id = ANY(%s::uuid[])',
            [shown],
        )
        assert await cursor.fetchone() == (0,)


async def test_a_status_message_cannot_be_forged_through_the_link(
    browser: Any, server: Served
) -> None:
    page = await signed_in(browser, server, ADMIN_KEY)
    for query in ("did=discard&n=987654", "did=bulk-retry&n=5&done=forged.sig"):
        await page.goto(f"{server.dashboard}/?{query}")
        assert await page.locator("h1").inner_text() == "Overview"
        assert await page.locator(".flash").count() == 0
