"""``queuey dashboard`` serves the dashboard alone (no publish endpoint), closed by default,
and stops cleanly on SIGTERM."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.acceptance.dashboard_server import ADMIN_KEY, serve, write_app

pytestmark = pytest.mark.postgres


def test_queuey_dashboard_serves_the_dashboard_alone(
    tmp_path: Path, database_url: str, pg_schema: str
) -> None:
    config = write_app(tmp_path)
    with serve(["dashboard"], config, database_url, pg_schema, "/api/dashboard/login") as s:
        login = httpx.get(f"{s.dashboard}/login")
        overview = httpx.get(f"{s.dashboard}/", headers={"X-Api-Key": ADMIN_KEY})
        publish = httpx.post(f"{s.url}/api/queues/order.paid", headers={"X-Api-Key": ADMIN_KEY})
    assert login.status_code == 200 and "Sign in" in login.text
    assert overview.status_code == 200 and "admin-bot" in overview.text
    assert publish.status_code == 404  # the endpoint is not served by this command
    assert s.process.returncode == 0  # SIGTERM: a graceful stop


def test_a_private_dashboard_answers_404(tmp_path: Path, database_url: str, pg_schema: str) -> None:
    config = write_app(tmp_path, view="private")
    with serve(["dashboard"], config, database_url, pg_schema, "/api/dashboard/") as s:
        answer = httpx.get(f"{s.dashboard}/login")
    assert answer.status_code == 404 and "Sign in" not in answer.text
    assert s.process.returncode == 0


def test_the_topic_app_panel_shows_only_for_a_file_with_a_topic_app(
    tmp_path: Path, database_url: str, pg_schema: str
) -> None:
    config = write_app(tmp_path)
    with serve(["dashboard"], config, database_url, pg_schema, "/api/dashboard/login") as s:
        with_app = httpx.get(f"{s.dashboard}/", headers={"X-Api-Key": ADMIN_KEY})
    text = config.read_text()
    config.write_text(text[text.index("[http]") :])  # no [functions], no [queues]
    with serve(["dashboard"], config, database_url, pg_schema, "/api/dashboard/login") as s:
        without = httpx.get(f"{s.dashboard}/", headers={"X-Api-Key": ADMIN_KEY})
    assert with_app.status_code == 200 and "Topic app <code>shop</code>" in with_app.text
    assert without.status_code == 200 and "Topic app" not in without.text
