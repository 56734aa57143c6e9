"""The command line as a user runs it: the demo on every backend, and `queuey worker` shutting
down gracefully on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from queuey import Producer
from queuey.backends.postgres import PostgresBackend
from tests.acceptance.worker_app import CliQueues, Nap
from tests.conftest import unique

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {
    "quickstart.emails": {"acked": 5, "dead": 1, "pending": 0},
    "quickstart.images": {"acked": 1, "dead": 0, "pending": 0},
    "quickstart.api": {"acked": 2, "dead": 0, "pending": 0},
}


def queuey(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queuey", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def check_tour(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["queues"] == EXPECTED
    (dead,) = summary["dead_letters"]
    assert dead["queue"] == "quickstart.emails" and dead["attempt"] == 1
    assert "not-an-address" in dead["reason"]


def test_demo_in_memory() -> None:
    check_tour(queuey("demo", "--json"))
    table = queuey("demo")
    assert table.returncode == 0 and "quickstart.emails" in table.stdout


def test_demo_on_postgres_twice_gives_the_same_counts(database_url: str) -> None:
    schema = unique("demo")
    try:
        check_tour(
            queuey(
                "demo",
                "--backend",
                "postgres",
                "--json",
                "--schema",
                schema,
                env={"QUEUEY_DATABASE_URL": database_url},
            )
        )
        check_tour(
            queuey(
                "demo",
                "--backend",
                "postgres",
                "--database-url",
                database_url,
                "--schema",
                schema,
                "--json",
            )
        )
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_demo_on_rabbitmq_gives_the_same_counts(amqp_url: str) -> None:
    check_tour(queuey("demo", "--backend", "rabbitmq", "--json", env={"QUEUEY_AMQP_URL": amqp_url}))
    check_tour(queuey("demo", "--backend", "rabbitmq", "--amqp-url", amqp_url, "--json"))


def test_demo_without_a_url_is_bad_usage() -> None:
    env = {k: v for k, v in os.environ.items() if k != "QUEUEY_DATABASE_URL"}
    result = subprocess.run(
        [sys.executable, "-m", "queuey", "demo", "--backend", "postgres"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert result.returncode == 2 and "QUEUEY_DATABASE_URL" in result.stderr


async def test_worker_command_finishes_running_jobs_on_sigterm(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(CliQueues, backend)
        await producer.enqueue_many([Nap(seconds=1.0) for _ in range(2)])
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "QUEUEY_DATABASE_URL": database_url,
        "QUEUEY_SCHEMA": pg_schema,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "queuey", "worker", "tests.acceptance.worker_app:build"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    started = [proc.stdout.readline(), proc.stdout.readline()]
    assert all(line.startswith("started") for line in started), started
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert out.count("finished") == 2
    assert await statuses(database_url, pg_schema) == {"done": 2}


async def statuses(url: str, schema: str) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            sql.SQL("SELECT status, count(*) FROM {} GROUP BY 1").format(
                sql.Identifier(schema, "queue_message")
            )
        )
        return dict(await cursor.fetchall())
