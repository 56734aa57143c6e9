"""Real worker processes killed with SIGKILL at random moments, a poisoned job that kills its
worker every time, and PostgreSQL restarted under running workers: every job runs at least
once, none is left pending or running, and a crash loop ends ``failed``."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import psycopg
import pytest
from psycopg import sql

from queuey import BackendError, Producer
from queuey.backends.postgres import PostgresBackend
from tests.helpers import python_path
from tests.integration.postgres.crash_app import CrashQueues, Record

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[3]


class Fleet:
    """Worker subprocesses running ``crash_app``."""

    def __init__(self, url: str, schema: str, max_redeliveries: int) -> None:
        self.args = [
            sys.executable,
            "-m",
            "tests.integration.postgres.crash_app",
            url,
            schema,
            str(max_redeliveries),
        ]
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        """Start one worker and wait (up to 60 s) until it says it is connected and ready, so
        a test's kill or server restart never lands before the worker has started."""
        env = {**os.environ, "PYTHONPATH": python_path()}
        proc = subprocess.Popen(self.args, cwd=ROOT, env=env, stdout=subprocess.PIPE)
        self.procs.append(proc)
        ready = threading.Event()

        def watch(stream: IO[bytes]) -> None:
            for line in stream:
                if line.strip() == b"ready":
                    ready.set()
            ready.set()  # ended without it: the assertion below reports the exit

        assert proc.stdout is not None
        threading.Thread(target=watch, args=(proc.stdout,), daemon=True).start()
        ready.wait(timeout=60)
        assert proc.poll() is None, f"worker exited at start-up with {proc.returncode}"
        return proc

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.procs if p.poll() is None]

    def kill_one(self, rng: random.Random) -> None:
        victims = self.alive()
        if victims:
            rng.choice(victims).send_signal(signal.SIGKILL)

    def stop(self) -> None:
        for proc in self.alive():
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def fleet(url: str, schema: str, size: int, max_redeliveries: int = 5) -> Iterator[Fleet]:
    group = Fleet(url, schema, max_redeliveries)
    for _ in range(size):
        group.start()
    try:
        yield group
    finally:
        group.stop()


async def statuses(url: str, schema: str) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            sql.SQL("SELECT status, count(*) FROM {} GROUP BY status").format(
                sql.Identifier(schema, "queue_message")
            )
        )
        return {status: count for status, count in await cursor.fetchall()}


async def ran(url: str, schema: str) -> set[int]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            sql.SQL("SELECT DISTINCT n FROM {}").format(sql.Identifier(schema, "runs"))
        )
        return {n for (n,) in await cursor.fetchall()}


@pytest.fixture
async def crash_schema(database_url: str, pg_schema: str) -> AsyncIterator[str]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("CREATE TABLE {} (n int, pid int)").format(sql.Identifier(pg_schema, "runs"))
        )
    yield pg_schema


async def wait_for(predicate: Any, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.2)


async def test_sigkilled_workers_lose_nothing(database_url: str, crash_schema: str) -> None:
    total = 2000
    async with await PostgresBackend.connect(database_url, schema=crash_schema) as backend:
        producer = await Producer.create(CrashQueues, backend)
        await producer.enqueue_many([Record(n=n, sleep_ms=n % 7) for n in range(total)])
    rng = random.Random(7)
    with fleet(database_url, crash_schema, size=3) as workers:
        for _ in range(12):
            await asyncio.sleep(rng.uniform(0.2, 0.6))
            workers.kill_one(rng)
            workers.start()

        async def all_done() -> bool:
            return (await statuses(database_url, crash_schema)).get("done", 0) == total

        await wait_for(all_done, timeout=90)
        killed = sum(1 for p in workers.procs if p.returncode == -signal.SIGKILL)
    assert killed >= 10
    assert await ran(database_url, crash_schema) == set(range(total))
    assert await statuses(database_url, crash_schema) == {"done": total}


async def test_poisoned_job_ends_failed_after_max_redeliveries(
    database_url: str, crash_schema: str
) -> None:
    async with await PostgresBackend.connect(database_url, schema=crash_schema) as backend:
        producer = await Producer.create(CrashQueues, backend)
        await producer.enqueue_many([Record(n=n) for n in range(10)])
        await producer.enqueue(Record(n=99, poison=True))
        await producer.enqueue_many([Record(n=n) for n in range(10, 20)])
        with fleet(database_url, crash_schema, size=1, max_redeliveries=3) as workers:

            async def settled() -> bool:
                if not workers.alive():
                    workers.start()
                counts = await statuses(database_url, crash_schema)
                return counts.get("failed", 0) == 1 and counts.get("done", 0) == 20

            await wait_for(settled, timeout=60)
        dead = await backend.list_dead(CrashQueues.work.name)
    assert [(e.payload["n"], r) for e, r in dead] == [
        (99, "worker lost 3 times: the lease expired while the job was running each time")
    ]
    assert await ran(database_url, crash_schema) == set(range(20))


def restart_postgres() -> None:
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
        check=True,
        capture_output=True,
        timeout=60,
    )


async def enqueue_retrying(producer: Producer[CrashQueues], job: Record) -> None:
    for _ in range(200):
        try:
            await producer.enqueue(job)
            return
        except BackendError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"could not enqueue {job}")


@pytest.mark.serial
async def test_postgres_restart_under_running_workers(database_url: str, crash_schema: str) -> None:
    if not Path("/etc/postgresql").exists():
        pytest.skip("no local PostgreSQL cluster to restart")
    total = 600
    async with await PostgresBackend.connect(database_url, schema=crash_schema) as backend:
        producer = await Producer.create(CrashQueues, backend)
        with fleet(database_url, crash_schema, size=2) as workers:
            for n in range(total // 2):
                await enqueue_retrying(producer, Record(n=n, sleep_ms=2))
            await asyncio.to_thread(restart_postgres)
            for n in range(total // 2, total):
                await enqueue_retrying(producer, Record(n=n, sleep_ms=2))

            async def all_done() -> bool:
                try:
                    counts = await statuses(database_url, crash_schema)
                except psycopg.OperationalError:
                    return False
                return counts.get("done", 0) == total

            await wait_for(all_done, timeout=90)
            assert len(workers.alive()) == 2, "workers must survive a database restart"
    assert await ran(database_url, crash_schema) == set(range(total))
