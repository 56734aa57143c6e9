"""``queuey run --http`` with an app file that has ``[queues.schedule]`` and takes idempotency
keys: the subscriber consumes through the backend itself (a pause is the claim's limit zero,
no wrapper), so schedules fire (exactly once per slot), a repeated ``Idempotency-Key``
replays the first publication, and the topic app's functions run, all in one process."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.acceptance.dashboard_server import ADMIN_KEY, serve, write_app

pytestmark = pytest.mark.postgres

SCHEDULE = """
[queues.schedule]
"tick" = { every = "1s", payload = { from = "schedule" } }
"""


def rows(database_url: str, schema: str, topic: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        query = f'SELECT status, payload FROM "{schema}".queue_message WHERE queue = %s'
        return conn.execute(query, (topic,)).fetchall()


def test_run_http_fires_schedules_and_replays_idempotency_keys(
    tmp_path: Path, database_url: str, pg_schema: str
) -> None:
    config = write_app(tmp_path)
    flaky = '"flaky.work" = "flaky"'
    text = config.read_text().replace(flaky, flaky + '\n"tick" = "fulfil"')
    config.write_text(text.replace("[http]", SCHEDULE + "\n[http]", 1))
    key = {"X-Api-Key": ADMIN_KEY, "Idempotency-Key": '"run-http-0001"'}
    with serve(["run", "--http"], config, database_url, pg_schema, "/api/dashboard/login") as s:
        first = httpx.post(f"{s.url}/api/queues/order.paid", json={"n": 1}, headers=key)
        again = httpx.post(f"{s.url}/api/queues/order.paid", json={"n": 1}, headers=key)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ticks = rows(database_url, pg_schema, "tick")
            paid = rows(database_url, pg_schema, "order.paid")
            if any(status == "done" for status, _ in ticks) and paid == [("done", {"n": 1})]:
                break
            time.sleep(0.2)
        overview = httpx.get(f"{s.dashboard}/", headers={"X-Api-Key": ADMIN_KEY})
    assert s.process.returncode == 0, s.process.stdout.read() if s.process.stdout else ""
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["id"] == first.json()["id"]
    assert rows(database_url, pg_schema, "order.paid") == [("done", {"n": 1})]
    ticks = rows(database_url, pg_schema, "tick")
    assert ticks and all(payload == {"from": "schedule"} for _, payload in ticks)
    assert any(status == "done" for status, _ in ticks)
    assert overview.status_code == 200 and "tick" in overview.text
