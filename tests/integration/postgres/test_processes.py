"""``queuey worker --processes N``: a supervisor of N real worker processes. One killed with
SIGKILL is replaced, its jobs come back after their lease and every job is handled at least
once, none left behind; SIGTERM stops them all gracefully; a supervisor killed with SIGKILL
leaves no worker process behind, and nothing is lost."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from queuey import Producer
from queuey.backends.postgres import PostgresBackend
from tests.helpers import ROOT, python_path
from tests.integration.postgres.threads_app import Nap, ThreadQueues, runs_ddl
from tests.integration.postgres.worker_processes import execute, message_rows, run_rows, wait_for

pytestmark = pytest.mark.postgres

JOBS = 400


def children(pid: int) -> set[int]:
    """The live child processes of ``pid``."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return set()
    return {int(child) for child in text.split()}


def worker_command(processes: int) -> list[str]:
    """``queuey worker`` of ``processes_app`` (its environment: ``worker_env``)."""
    target = "tests.integration.postgres.processes_app:build"
    return [sys.executable, "-m", "queuey", "worker", target, "--processes", str(processes)]


def worker_env(database_url: str, pg_schema: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": python_path(),
        "QUEUEY_DATABASE_URL": database_url,
        "QUEUEY_TEST_SCHEMA": pg_schema,
    }
    env.pop("QUEUEY_PROCESS_INDEX", None)
    env.pop("QUEUEY_SUPERVISOR_PID", None)
    return env


async def enqueue_naps(database_url: str, pg_schema: str, sleep_ms: int) -> None:
    await execute(database_url, runs_ddl(pg_schema))
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(ThreadQueues, backend)
        await producer.enqueue_many([Nap(n=n, sleep_ms=sleep_ms) for n in range(JOBS)])


async def test_a_killed_worker_process_is_replaced_and_nothing_is_lost(
    database_url: str, pg_schema: str
) -> None:
    await enqueue_naps(database_url, pg_schema, sleep_ms=50)
    env = worker_env(database_url, pg_schema)
    command = worker_command(processes=2)
    with tempfile.TemporaryFile() as errors:
        supervisor = subprocess.Popen(command, cwd=ROOT, env=env, stderr=errors)
        try:
            first: set[int] = set()

            async def both_working() -> bool:
                first.update(children(supervisor.pid))
                pids = {row[1] for row in await run_rows(database_url, pg_schema)}
                return len(first) == 2 and first <= pids

            await wait_for(both_working, timeout=60)
            victim = min(first)
            os.kill(victim, signal.SIGKILL)

            async def replaced() -> bool:
                now = children(supervisor.pid)
                return len(now) == 2 and victim not in now

            await wait_for(replaced, timeout=30)
            newcomer = (children(supervisor.pid) - first).pop()

            async def all_done() -> bool:
                rows = await message_rows(database_url, pg_schema)
                return len(rows) == JOBS and all(row[0] == "done" for row in rows.values())

            await wait_for(all_done, timeout=120)
            supervisor.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(asyncio.to_thread(supervisor.wait), 60)
        finally:
            if supervisor.poll() is None:
                supervisor.kill()
                supervisor.wait()
        errors.seek(0)
        log = errors.read().decode()
    assert code == 0, log
    runs = await run_rows(database_url, pg_schema)
    assert {row[0] for row in runs} == set(range(JOBS))  # each job run at least once
    assert newcomer in {row[1] for row in runs}  # the replacement took work
    assert f"(pid {victim}) died with signal SIGKILL" in log and "restarting in" in log
    assert children(supervisor.pid) == set()
    for pid in first | {newcomer}:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_a_killed_supervisor_leaves_no_worker_process_and_loses_nothing(
    database_url: str, pg_schema: str
) -> None:
    await enqueue_naps(database_url, pg_schema, sleep_ms=200)
    env = worker_env(database_url, pg_schema)
    with tempfile.TemporaryFile() as errors:
        supervisor = subprocess.Popen(worker_command(processes=2), cwd=ROOT, env=env, stderr=errors)
        workers: set[int] = set()
        try:

            async def both_working() -> bool:
                workers.update(children(supervisor.pid))
                pids = {row[1] for row in await run_rows(database_url, pg_schema)}
                return len(workers) == 2 and workers <= pids

            await wait_for(both_working, timeout=60)
            supervisor.kill()  # SIGKILL: it can pass nothing on to its workers
            supervisor.wait()

            async def workers_gone() -> bool:
                return not any(alive(pid) for pid in workers)

            await wait_for(workers_gone, timeout=30)
        finally:
            for pid in workers:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
        errors.seek(0)
        log = errors.read().decode()
    assert f"supervisor (pid {supervisor.pid}) is gone" in log, log
    assert "stopping worker process" in log
    rows = await message_rows(database_url, pg_schema)
    assert len(rows) == JOBS
    assert not any(row[0] == "running" for row in rows.values())  # handed back or done
    finisher = subprocess.Popen(worker_command(1), cwd=ROOT, env=env)
    try:

        async def all_done() -> bool:
            rows = await message_rows(database_url, pg_schema)
            return all(row[0] == "done" for row in rows.values())

        await wait_for(all_done, timeout=120)
    finally:
        finisher.send_signal(signal.SIGTERM)
        await asyncio.wait_for(asyncio.to_thread(finisher.wait), 60)
    runs = await run_rows(database_url, pg_schema)
    assert {row[0] for row in runs} == set(range(JOBS))


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as gone: it no longer runs code)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
