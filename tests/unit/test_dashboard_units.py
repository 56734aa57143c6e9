"""The dashboard's pieces without a database: the [dashboard] table, session cookies, the
redirect guard, the chart, and the files the package must ship."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from importlib import resources

import pytest

from queuey.backends.dashboard_store import JobFilter, Minute
from queuey.dashboard.chart import throughput_svg
from queuey.dashboard.config import DashboardConfig
from queuey.dashboard.session import SessionSigner
from queuey.dashboard.web import Templates
from queuey.errors import ConfigError
from queuey.http.access import Level
from queuey.http.auth import Principal

SECRET = "a-session-secret-of-32-bytes-or-more!"


def test_the_dashboard_is_private_unless_the_table_opens_it() -> None:
    assert not DashboardConfig.from_table(None, "app.toml").enabled
    assert not DashboardConfig.from_table({}, "app.toml").enabled
    config = DashboardConfig.from_table({"view": "role:ops", "act": "role:admin"}, "app.toml")
    assert config.enabled and config.act.role == "admin" and config.session_hours == 8


def test_an_unparseable_access_string_closes_the_door_with_a_problem() -> None:
    config = DashboardConfig.from_table({"view": "role:", "act": "everyone"}, "app.toml")
    assert config.view.level is Level.PRIVATE and config.view.problem is not None
    assert config.act.level is Level.PRIVATE


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"viewers": "public"}, "app.toml: dashboard: viewers: is not a known key"),
        ({"view": 1}, "app.toml: dashboard: view: expected a string"),
        ({"session_hours": 0}, "app.toml: dashboard: session_hours: expected a finite number > 0"),
        ({"session_hours": True}, "app.toml: dashboard: session_hours: expected a finite number"),
        ({"secret": "short"}, "app.toml: dashboard: secret: must be at least 32 bytes long"),
    ],
)
def test_a_bad_table_names_the_file_and_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        DashboardConfig.from_table(table, "app.toml")
    assert str(caught.value).startswith(message)
    assert "short" not in str(caught.value)


def test_a_session_round_trips_and_a_tampered_or_expired_one_does_not() -> None:
    signer = SessionSigner(SECRET, 3600)
    session = signer.new(Principal("olga", frozenset({"ops"}), "acme", "staff"))
    value = signer.encode(session)
    assert signer.decode(value) == session
    body, signature = value.split(".")
    assert signer.decode(f"{body}x.{signature}") is None
    assert SessionSigner(None, 3600).decode(value) is None  # another key
    assert signer.decode("garbage") is None and signer.decode(None) is None
    ended = signer.new(Principal("olga"), ends_by=time.time() - 1)
    assert signer.decode(signer.encode(ended)) is None
    assert session.csrf_matches(session.csrf) and not session.csrf_matches("nope")


def test_redirects_stay_inside_the_dashboard() -> None:
    templates = Templates("/api/dashboard")
    assert templates.local("/api/dashboard/jobs?x=1") == "/api/dashboard/jobs?x=1"
    for outside in ["https://evil.example/", "//evil.example/api/dashboard", "/api/dash", None]:
        assert templates.local(outside) == "/api/dashboard/"


def test_the_chart_has_a_bar_per_minute_and_a_readable_scale() -> None:
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    minutes = [Minute(start.replace(minute=m), done=m, failed=1) for m in range(60)]
    svg = str(throughput_svg(minutes))
    assert svg.count("<title>") == 60 and ">100<" in svg  # 59 + 1 rounds up to 100
    assert "12:59 UTC: 59 done, 1 failed" in svg


def test_a_job_filter_describes_itself_for_the_audit_log() -> None:
    assert JobFilter("failed", "job", "emails", "Send", "boom").describe() == (
        "failed job:emails type=Send text='boom'"
    )
    with pytest.raises(ValueError):
        JobFilter("lost")


def test_the_package_ships_its_templates_static_files_and_sql() -> None:
    dashboard = resources.files("queuey.dashboard")
    for name in ["templates/base.html", "static/dashboard.css", "static/dashboard.js"]:
        assert dashboard.joinpath(name).is_file(), name
    sql = resources.files("queuey.backends.postgres").joinpath("sql")
    assert sql.joinpath("dashboard.sql").is_file()
    assert sql.joinpath("migrations/0004_dashboard_audit.sql").is_file()
