"""``queuey run`` and ``queuey publish`` in subprocesses, on the example app in
``examples/topics`` and a real PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "topics" / "app.toml"


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env.pop("QUEUEY_DATABASE_URL", None)
    return env


def queuey(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queuey", *args],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
        check=False,
    )


def statuses(database_url: str, schema: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(database_url) as conn:
        cursor = conn.execute(
            f'SELECT queue, job_type, status FROM "{schema}".queue_message ORDER BY seq'
        )
        return [tuple(row) for row in cursor.fetchall()]


@pytest.fixture
def runner(database_url: str, pg_schema: str) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "queuey", "-v", "run", "--config", str(EXAMPLE)),
            *("--database-url", database_url, "--schema", pg_schema),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
    )
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    for line in process.stderr:
        if "topic subscriber started" in line or time.monotonic() > deadline:
            break
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()


def test_publish_reaches_every_subscriber_of_a_running_app(
    runner: subprocess.Popen[str], database_url: str, pg_schema: str
) -> None:
    args = ["--config", str(EXAMPLE), "--database-url", database_url, "--schema", pg_schema]
    paid = queuey("publish", *args, "--published-by", "user-1", "order.paid", '{"order": 42}')
    assert paid.returncode == 0, paid.stderr
    publication = json.loads(paid.stdout)
    assert (publication["topic"], publication["delivered"]) == ("order.paid", 2)
    signed_up = queuey("publish", *args, "user.signed_up", '{"user": 7}')
    assert json.loads(signed_up.stdout)["delivered"] == 1
    orphan = queuey("publish", *args, "nobody.listens")
    assert json.loads(orphan.stdout)["delivered"] == 0

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = statuses(database_url, pg_schema)
        if len(found) == 4 and all(status == "done" for *_, status in found):
            break
        time.sleep(0.05)
    assert sorted(statuses(database_url, pg_schema)) == [
        ("nobody.listens", "", "done"),
        ("order.paid", "fulfil_order", "done"),
        ("order.paid", "notify_ops", "done"),
        ("user.signed_up", "send_welcome", "done"),
    ]

    runner.send_signal(signal.SIGINT)
    _, stderr = runner.communicate(timeout=30)
    assert runner.returncode == 0, stderr
    assert "fulfilling order 42" in stderr
    assert "topic subscriber stopped" in stderr
    # each outcome names the message: its id, topic, subscriber and attempt
    assert re.search(
        r"INFO queuey\.topics: message [0-9a-f-]{36} on order\.paid for notify_ops "
        r"\(attempt 1\) handled",
        stderr,
    ), stderr


def test_publish_prints_a_message_and_exits_2_on_bad_input(
    database_url: str, pg_schema: str
) -> None:
    args = ["--config", str(EXAMPLE), "--database-url", database_url, "--schema", pg_schema]
    bad_topic = queuey("publish", *args, "order paid", "{}")
    assert bad_topic.returncode == 2
    assert "is not a topic" in bad_topic.stderr
    bad_json = queuey("publish", *args, "order.paid", "{nope")
    assert bad_json.returncode == 2
    assert "not valid JSON" in bad_json.stderr
    assert statuses(database_url, pg_schema) == []


def test_a_database_password_never_reaches_the_output(tmp_path: Path) -> None:
    app = tmp_path / "app.toml"
    app.write_text('[database]\nurl = "postgresql://someone:hunter2@127.0.0.1:1/nowhere"\n')
    for command in (["publish", "--config", str(app), "t", "{}"], ["run", "--config", str(app)]):
        result = queuey("-v", *command)
        assert result.returncode == 3, result.stderr
        assert "hunter2" not in result.stdout + result.stderr
    assert "connecting to postgresql://someone:***@127.0.0.1:1/nowhere" in result.stderr
