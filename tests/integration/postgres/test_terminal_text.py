"""Text from the database and from jobs reaches the terminal with its control sequences shown,
never obeyed: the real ``queuey`` CLI in a child process against PostgreSQL, with rows whose
error, payload, job type, queue and publisher hold OSC, CSI, C1, CR and bidi sequences, and a
worker whose dead letter logs such an error in the text log and the JSON log."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from typing import Any

import pytest
from psycopg import sql
from psycopg.types.json import Json

from queuey import Producer
from queuey.backends.postgres import PostgresBackend
from tests.acceptance.worker_hostile import Echo, HostileQueues
from tests.helpers import ROOT, python_path
from tests.integration.postgres.dashboard_helpers import execute

pytestmark = pytest.mark.postgres

OSC_TITLE = "\x1b]0;pwned\x07"
OSC_LINK = "\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\"
CSI = "\x1b[2J\x1b[H\x1b[31m"
C1 = "\x9b31m\x9d0;eight-bit title\x9c"
OVERWRITE = "ok\rFAKE\x08\x08\x7f\x07"
BIDI = "\u202egnp.exe"
FORGED_LINE = "boom\nstatus        done"
HOSTILE = OSC_TITLE + OSC_LINK + CSI + C1 + OVERWRITE + BIDI + FORGED_LINE
UNSAFE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def unsafe(text: str) -> list[str]:
    """Every character of ``text`` a terminal would obey (newlines are the output's own)."""
    return UNSAFE.findall(text)


def strings(value: Any) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [text for item in value for text in strings(item)] if isinstance(value, list) else []


def queuey(*argv: str, url: str, **env: str) -> subprocess.CompletedProcess[str]:
    child = {**os.environ, "PYTHONPATH": python_path(), "QUEUEY_DATABASE_URL": url, **env}
    return subprocess.run(
        [sys.executable, "-m", "queuey", *argv],
        env=child,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
        cwd=ROOT,
    )


async def hostile_rows(url: str, schema: str) -> dict[str, str]:
    """A failed and a pending row whose every free-text column holds ``HOSTILE``."""
    table = sql.Identifier(schema, "queue_message")
    insert = sql.SQL(
        "INSERT INTO {} (id, kind, queue, job_type, status, payload, error, processed_at, "
        "published_by) VALUES (gen_random_uuid(), 'job', %s, %s, %s, %s, %s, now(), %s) "
        "RETURNING id::text"
    ).format(table)
    ids = {}
    for status in ("failed", "pending"):
        params = ["q" + HOSTILE, "t" + HOSTILE, status, Json({"note": HOSTILE}), HOSTILE, HOSTILE]
        ids[status] = (await execute(url, insert, params))[0][0]
    return ids


async def test_every_command_shows_control_sequences_escaped(
    database_url: str, pg_schema: str
) -> None:
    ids = await hostile_rows(database_url, pg_schema)
    schema = ("--schema", pg_schema)
    commands = {
        "failed list": ["failed", "list", *schema],
        "failed list --json": ["failed", "list", "--json", *schema],
        "failed show": ["failed", "show", ids["failed"], *schema],
        "failed show --json": ["failed", "show", ids["failed"], "--json", *schema],
        "jobs show": ["jobs", "show", ids["failed"], *schema],
        "jobs show pending": ["jobs", "show", ids["pending"], *schema],
        "jobs show --json": ["jobs", "show", ids["failed"], "--json", *schema],
        "status": ["status", *schema],
        "status --json": ["status", "--json", *schema],
        "not failed": ["failed", "show", ids["pending"], *schema],
        "no such queue": ["failed", "list", "--queue", "nope" + OSC_TITLE, *schema],
        "failed retry": ["failed", "retry", ids["failed"], *schema],
    }
    results = {
        name: await asyncio.to_thread(queuey, *argv, url=database_url)
        for name, argv in commands.items()
    }
    for name, result in results.items():
        assert unsafe(result.stdout + result.stderr) == [], (name, result)
    listed = results["failed list"].stdout
    assert "\\x1b]0;pwned\\x07" in listed and "boom\\nstatus        done" in listed
    assert len(listed.splitlines()) == 2  # the row, then its error on one line
    for name in ("failed show", "jobs show"):
        shown = results[name].stdout
        assert "\\x1b]8;;https://evil.example/\\x1b\\click me" in shown
        assert "\\x9b31m\\x9d0;eight-bit title\\x9c" in shown and "\\u202egnp.exe" in shown
        assert "ok\\rFAKE\\x08\\x08\\x7f\\x07" in shown
        labels = [line.split(" ", 1)[0] for line in shown.splitlines() if line[:1].isalpha()]
        assert labels.count("status") + labels.count("state") == 1  # no forged field line
        assert "\n  status        done" in shown  # the error's second line, indented
    for name in ("failed list --json", "failed show --json", "jobs show --json", "status --json"):
        document = json.loads(results[name].stdout)  # still the same JSON value
        assert any(HOSTILE in text for text in strings(document)), name
    assert "\\x1b]0;pwned\\x07" in results["no such queue"].stderr
    assert results["failed retry"].returncode == 0
    assert "\\x1b[2J" in results["failed retry"].stdout


def start_worker(url: str, schema: str, *flags: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": python_path(), "QUEUEY_DATABASE_URL": url}
    return subprocess.Popen(
        [sys.executable, "-m", "queuey", "worker", "tests.acceptance.worker_hostile:build",
         *flags],
        cwd=ROOT, env={**env, "QUEUEY_SCHEMA": schema}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, encoding="utf-8",
    )  # fmt: skip


async def dead_letter_log(url: str, schema: str, *flags: str) -> tuple[str, str]:
    """The stderr of a worker that dead-letters one ``Echo(text=HOSTILE)``, and its id."""
    async with PostgresBackend(url, schema=schema) as backend:
        producer = await Producer.create(HostileQueues, backend)
        job_id = str(await producer.enqueue(Echo(text=HOSTILE)))
    proc = start_worker(url, schema, *flags)
    try:
        async with asyncio.timeout(30):
            while (await execute(url, f'SELECT 1 FROM "{schema}".queue_message'
                                 " WHERE status = 'failed'")) == []:  # fmt: skip
                await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)  # the outcome's log line follows the settle
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.to_thread(proc.communicate, timeout=30)
    return err, job_id


async def test_the_text_log_shows_a_job_s_error_escaped_on_one_line(
    database_url: str, pg_schema: str
) -> None:
    err, job_id = await dead_letter_log(database_url, pg_schema)
    assert unsafe(err) == [], err
    [line] = [line for line in err.splitlines() if "refused: " in line]
    assert line.split(" ", 3)[2] == "ERROR"
    assert "\\x1b]0;pwned\\x07" in line and "boom\\nstatus        done" in line
    for argv in (["jobs", "show", job_id], ["failed", "show", job_id]):  # its attempt errors
        shown = await asyncio.to_thread(queuey, *argv, "--schema", pg_schema, url=database_url)
        assert unsafe(shown.stdout + shown.stderr) == [], shown
        attempts = shown.stdout.split("attempt errors (1")[1]
        assert "Fatal: refused: \\x1b]0;pwned\\x07" in attempts


async def test_the_json_log_keeps_the_error_and_escapes_what_json_leaves_raw(
    database_url: str, pg_schema: str
) -> None:
    err, _ = await dead_letter_log(database_url, pg_schema, "--log-format", "json")
    assert unsafe(err) == [], err
    entries: list[dict[str, Any]] = [json.loads(line) for line in err.splitlines() if "{" in line]
    assert any(HOSTILE in entry["message"] for entry in entries), entries
