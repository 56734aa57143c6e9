"""The command line as a user runs it: the demo on every backend (and under a prefix of its
own), `--version`, `-v` after a command, and `queuey worker`'s factory form shutting down
gracefully on SIGTERM (the plain form and the flags: ``test_cli_worker``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg import sql

from queuey import Producer, __version__
from queuey.backends.postgres import PostgresBackend
from queuey.demo import declare_tour
from tests.acceptance.worker_app import CliQueues, Nap
from tests.conftest import unique
from tests.helpers import ROOT, python_path

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
        env={**os.environ, "PYTHONPATH": python_path(), **(env or {})},
    )


def check_tour(result: subprocess.CompletedProcess[str], prefix: str = "quickstart") -> None:
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["queues"] == {
        name.replace("quickstart.", f"{prefix}.", 1): counts for name, counts in EXPECTED.items()
    }
    (dead,) = summary["dead_letters"]
    assert dead["queue"] == f"{prefix}.emails" and dead["attempt"] == 1
    assert dead["job_type"] == f"{prefix}.SendEmail"
    assert "not-an-address" in dead["reason"]
    assert summary["settled"] == 6


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


async def test_two_demos_with_their_own_prefixes_share_a_broker(amqp_url: str) -> None:
    prefixes = (unique("demo"), unique("demo"))
    command = [sys.executable, "-m", "queuey", "demo", "--backend", "rabbitmq", "--json"]
    env = {**os.environ, "PYTHONPATH": python_path(), "QUEUEY_AMQP_URL": amqp_url}
    try:
        runs = [
            subprocess.Popen(
                [*command, "--prefix", prefix], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
            )
            for prefix in prefixes
        ]
        for prefix, run in zip(prefixes, runs, strict=True):
            out, _ = await asyncio.to_thread(run.communicate, timeout=60)
            check_tour(subprocess.CompletedProcess(run.args, run.returncode, out, ""), prefix)
    finally:
        await delete_demo_queues(amqp_url, prefixes)


async def delete_demo_queues(amqp_url: str, prefixes: Iterable[str]) -> None:
    """Delete the demo's queues and their dead-letter queues (hold queues expire by
    themselves)."""
    import aio_pika

    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        for prefix in prefixes:
            for queue in declare_tour(prefix).queues.all():
                for name in (queue.name, f"{queue.name}.dead"):
                    await channel.queue_delete(name)


def test_demo_prefix_names_the_queues_on_every_backend() -> None:
    check_tour(queuey("demo", "--json", "--prefix", "mine"), "mine")
    table = queuey("demo", "--prefix", "mine")
    assert table.returncode == 0 and "mine.emails" in table.stdout
    assert "quickstart" not in table.stdout


def test_demo_prefix_on_postgres(database_url: str) -> None:
    schema = unique("demo")
    try:
        for prefix in ("one", "two"):
            check_tour(
                queuey(
                    "demo",
                    *("--backend", "postgres", "--database-url", database_url),
                    *("--schema", schema, "--prefix", prefix, "--json"),
                ),
                prefix,
            )
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_a_bad_demo_prefix_is_bad_usage() -> None:
    result = queuey("demo", "--prefix", " ")
    assert result.returncode == 2
    assert result.stderr.startswith("error: --prefix: ") and "prefix" in result.stderr


def test_version() -> None:
    result = queuey("--version")
    assert (result.returncode, result.stdout) == (0, f"queuey, version {__version__}\n")


def test_verbose_after_the_command_as_before_it() -> None:
    for args in (["-v", "demo", "--json"], ["demo", "--json", "-v"], ["demo", "-v", "--json"]):
        result = queuey(*args)
        assert result.returncode == 0, result.stderr
        assert "INFO queuey.worker: job quickstart.SendEmail " in result.stderr, args
    quiet = queuey("demo", "--json")
    assert "INFO" not in quiet.stderr and "WARNING queuey.worker" in quiet.stderr
    debug = queuey("demo", "--json", "-vv")
    assert debug.returncode == 0 and "DEBUG " in debug.stderr


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
        "PYTHONPATH": python_path(),
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


def test_queuey_run_prints_a_start_up_line(database_url: str, pg_schema: str) -> None:
    config = ROOT / "examples" / "topics" / "app.toml"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "queuey", "run", "--config", str(config)),
            *("--database-url", database_url, "--schema", pg_schema),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": python_path()},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    startup = proc.stderr.readline().rstrip("\n")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert startup.startswith("queuey run: topics user.signed_up, order.paid; backend PostgreSQL ")
    assert startup.endswith(f", schema {pg_schema}; concurrency 10")
