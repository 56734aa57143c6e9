"""Shared by the dashboard tests: an app with an admin key and a viewer key, rows to show,
and a signed-in client."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import httpx
import psycopg
from psycopg import sql
from psycopg.types.json import Json

from queuey.backends.postgres import PgDashboardStore
from queuey.dashboard import DashboardConfig, dashboard_mount
from queuey.http import (
    AccessPolicy,
    ApiKeyConfig,
    HttpConfig,
    JwtConfig,
    api_key_digest,
    publish_app,
)
from tests.unit.http.http_fakes import AUDIENCE, OPS_KEY, SECRET, RecordingPublisher

ADMIN_KEY = "qk_admin_0123456789abcdef"
BASE = "/api/dashboard"
XSS_PAYLOAD = {"note": "<script>alert('payload')</script>", "n": 1}
XSS_ERROR = "ValueError: <img src=x onerror=alert('error')>"


def http_settings() -> HttpConfig:
    """Bearer tokens, a viewer key (ops-bot: ops) and an operator key (admin-bot: admin)."""
    return HttpConfig(
        base="/api",
        jwt=JwtConfig(audience=AUDIENCE, secret=SECRET),
        api_keys=(
            ApiKeyConfig(id="ops-bot", sha256=api_key_digest(OPS_KEY), roles=frozenset({"ops"})),
            ApiKeyConfig(
                id="admin-bot", sha256=api_key_digest(ADMIN_KEY), roles=frozenset({"admin"})
            ),
        ),
    )


def dashboard(
    store: PgDashboardStore,
    *,
    view: str = "role:ops",
    act: str = "role:admin",
) -> Any:
    """The publish app (closed) with the dashboard mounted at /api/dashboard."""
    config = DashboardConfig(view=AccessPolicy.parse(view), act=AccessPolicy.parse(act))
    mount = dashboard_mount(config, store, http_settings(), app_prefix="shop")
    return publish_app(
        http_settings(), RecordingPublisher(), AccessPolicy.parse("private"), mounts=[mount]
    )


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


async def sign_in(http: httpx.AsyncClient, credential: str) -> httpx.Response:
    """Fill and post the sign-in form; returns the response to the post."""
    form = await http.get(f"{BASE}/login")
    token = re.search(r'name="token" value="([^"]+)"', form.text)
    assert token is not None
    data = {"token": token.group(1), "credential": credential, "next": f"{BASE}/"}
    return await http.post(f"{BASE}/login", data=data)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]*)"', html)
    assert found is not None, "no CSRF field on the page"
    return found.group(1)


async def execute(url: str, statement: sql.Composable | str, params: Sequence[Any] = ()) -> Any:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(statement, params)  # type: ignore[arg-type]
        return await cursor.fetchall() if cursor.description else None


async def seed(url: str, schema: str) -> dict[str, str]:
    """Rows to look at: a failed job whose payload and error hold markup, another failed job,
    a pending job, and a publication fanned out to two subscribers. Returns their ids."""
    table = sql.Identifier(schema, "queue_message")
    insert = sql.SQL(
        "INSERT INTO {} (id, kind, queue, job_type, status, payload, error, processed_at, "
        "published_by) VALUES (gen_random_uuid(), %s, %s, %s, %s, %s, %s, "
        "CASE WHEN %s IN ('done', 'failed') THEN now() END, %s) RETURNING id::text"
    ).format(table)
    rows = {
        "xss": ("job", "emails", "app.SendEmail", "failed", XSS_PAYLOAD, XSS_ERROR, ""),
        "failed": ("job", "emails", "app.SendEmail", "failed", {"n": 2}, "boom", ""),
        "other": ("job", "reports", "app.Build", "failed", {"n": 3}, "disk full", ""),
        "pending": ("job", "emails", "app.SendEmail", "pending", {"n": 4}, None, ""),
    }
    ids = {}
    for name, (kind, queue, job_type, status, payload, error, by) in rows.items():
        params = (kind, queue, job_type, status, Json(payload), error, status)
        found = await execute(url, insert, (*params, by))
        ids[name] = found[0][0]
    fan_out = sql.SQL(
        "INSERT INTO {} (id, kind, queue, job_type, status, payload, published_by, processed_at)"
        " VALUES (gen_random_uuid(), 'topic', 'order.paid', 'fulfil_order', 'done', '{{}}',"
        " 'olga', now()), (gen_random_uuid(), 'topic', 'order.paid', 'notify_ops', 'failed',"
        " '{{}}', 'olga', now()) RETURNING id::text"
    ).format(table)
    found = await execute(url, fan_out)
    ids["fulfil"], ids["notify"] = found[0][0], found[1][0]
    return ids


async def status_of(url: str, schema: str, job_id: str) -> str | None:
    table = sql.Identifier(schema, "queue_message")
    found = await execute(
        url, sql.SQL("SELECT status FROM {} WHERE id = %s").format(table), [job_id]
    )
    return found[0][0] if found else None
