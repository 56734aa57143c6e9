"""`queuey worker` as a user runs it: the plain module-level form on PostgreSQL (a backend built
at import, opened and closed by the command), its flags (`--queues`, `--concurrency`,
`--database-url`, `-v` after the command), the start-up line, and the errors that point at the
factory form."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from queuey import Producer
from queuey.backends.postgres import PostgresBackend
from queuey.cli import describe_backend
from tests.acceptance.test_cli import statuses
from tests.acceptance.worker_app import CliQueues, Mail, Nap
from tests.helpers import ROOT, python_path

PLAIN = "tests.acceptance.worker_plain:worker"
MEMORY = "tests.acceptance.worker_memory:worker"


def start(*args: str, env: dict[str, str], unset: str | None = None) -> subprocess.Popen[str]:
    """``queuey worker ARGS`` in a child process (``env`` added to this one's, ``unset`` left
    out), with stdout and stderr piped."""
    child = {**os.environ, "PYTHONPATH": python_path(), **env}
    child.pop(unset or "", None)
    return subprocess.Popen(
        [sys.executable, "-m", "queuey", "worker", *args],
        cwd=ROOT,
        env=child,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def first_stderr_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    return proc.stderr.readline().rstrip("\n")


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGTERM, then the rest of stdout and stderr; the worker must exit 0."""
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return out, err


async def test_the_plain_module_level_form_on_postgres(database_url: str, pg_schema: str) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(CliQueues, backend)
        await producer.enqueue_many([Nap(seconds=0.5) for _ in range(2)])
        await producer.enqueue(Mail(to="ada@example.com"))
    proc = start(
        PLAIN,
        *("--database-url", database_url, "-v"),
        env={"QUEUEY_SCHEMA": pg_schema},
        unset="QUEUEY_DATABASE_URL",  # the flag is enough
    )
    try:
        startup = first_stderr_line(proc)
        assert proc.stdout is not None
        lines = {proc.stdout.readline().split()[0] for _ in range(3)}
        assert lines == {"started", "mailed"}, lines
    finally:
        out, err = stop(proc)
    assert startup.startswith("queuey worker: queues cli.work, cli.mail; backend PostgreSQL ")
    assert f", schema {pg_schema}; concurrency 6" in startup
    assert out.count("finished") == 2
    # -v after the command; each outcome names the job's type, id, queue and attempt
    done = (
        r"INFO queuey\.worker: job cli\.\w+ [0-9a-f-]{36} \(cli\.(work|mail), attempt 1\) succeeded"
    )
    assert re.search(done, err), err
    password = urlsplit(database_url).password
    if password:
        assert password not in startup + err
    assert await statuses(database_url, pg_schema) == {"done": 3}


async def test_queues_and_concurrency_flags_on_postgres(database_url: str, pg_schema: str) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(CliQueues, backend)
        await producer.enqueue(Nap(seconds=0))
        await producer.enqueue(Mail(to="grace@example.com"))
    env = {"QUEUEY_SCHEMA": pg_schema, "QUEUEY_DATABASE_URL": database_url}
    proc = start(PLAIN, "--queues", "mail", "--concurrency", "3", env=env)
    try:
        startup = first_stderr_line(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "mailed grace@example.com\n"
    finally:
        out, _ = stop(proc)
    assert "queues cli.mail;" in startup and startup.endswith("; concurrency 3")
    assert "started" not in out
    assert await statuses(database_url, pg_schema) == {"done": 1, "pending": 1}


@pytest.mark.parametrize(
    ("args", "queues", "concurrency"),
    [
        ([], "cli.work, cli.mail", 6),
        (["--queues", "mail"], "cli.mail", 2),
        (["--queues", "cli.work,mail"], "cli.work, cli.mail", 6),
        (["--queues", " work , work "], "cli.work", 4),
        (["--concurrency", "9"], "cli.work, cli.mail", 9),
        (["--queues", "work", "--concurrency", "1"], "cli.work", 1),
    ],
)
def test_the_start_up_line_shows_what_the_flags_chose(
    args: list[str], queues: str, concurrency: int
) -> None:
    proc = start(MEMORY, *args, env={})
    try:
        startup = first_stderr_line(proc)
    finally:
        stop(proc)
    assert startup == f"queuey worker: queues {queues}; backend memory; concurrency {concurrency}"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--queues", "nope"], "'nope' is not a queue of CliQueues (it has cli.work, cli.mail)"),
        (["--queues", ","], "--queues: name at least one queue"),
        (["--concurrency", "0"], "0 is not in the range x>=1"),
    ],
)
def test_bad_flags_are_bad_usage(args: list[str], error: str) -> None:
    proc = start(MEMORY, *args, env={})
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert error in err


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("tests.acceptance.worker_app:not_a_worker", "is of type int, not a Worker"),
        ("tests.acceptance.worker_app:needs_arguments", "takes arguments"),
        ("tests.acceptance.worker_app:CliQueues", "returned an object of type CliQueues"),
    ],
)
def test_what_is_not_a_worker_or_a_factory_points_at_the_factory_form(
    target: str, error: str
) -> None:
    proc = start(target, env={"QUEUEY_SCHEMA": "unused"})
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert error in err
    assert "or at a factory taking no arguments that returns one" in " ".join(err.split())


def test_an_unmigrated_schema_says_to_migrate(database_url: str) -> None:
    env = {"QUEUEY_SCHEMA": "queuey_never_migrated"}
    proc = start(PLAIN, "--database-url", database_url, env=env, unset="QUEUEY_DATABASE_URL")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "queuey db migrate --schema queuey_never_migrated" in err


def test_describe_backend_never_shows_a_password() -> None:
    backend = PostgresBackend("postgresql://app:hunter2-secret@db.internal/app", schema="jobs")
    assert describe_backend(backend) == (
        "PostgreSQL postgresql://app:***@db.internal/app, schema jobs"
    )
