"""PostgreSQL failover behind a libpq multi-host URL (``host=a,b`` with
``target_session_attrs=read-write``): a throwaway primary and its synchronous standby
(``scripts/pg-standby``), the primary stopped at once and the standby promoted while a producer
enqueues and a worker drains. Producer and worker carry on within 10 s on the new primary, and
every enqueue that returned is handled (read from the handler's own records)."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from queuey import BackendError, Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend
from tests.conftest import unavailable
from tests.helpers import ROOT

pytestmark = pytest.mark.cluster

SCRIPT = ROOT / "scripts" / "pg-standby"
CONTINUE_WITHIN = 10.0  # seconds after the promotion


def _run(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/pg-standby {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@pytest.fixture(scope="module")
def failover_url() -> Iterator[str]:
    """The multi-host URL of a fresh primary and synchronous standby, removed afterwards."""
    try:
        out = _run("start", env={"QUEUEY_PG_SYNC": "1"})
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        unavailable("a local PostgreSQL primary and standby (scripts/pg-standby)", exc)
        raise
    try:
        line = next(line for line in out.splitlines() if line.startswith("export "))
        yield shlex.split(line.removeprefix("export "))[0].split("=", 1)[1]
    finally:
        _run("stop")


async def test_producer_and_worker_follow_a_promoted_standby(failover_url: str) -> None:
    prefix = f"fo{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        work = Queue(max_priority=0)

    class Task(Job[Queues], queue=Queues.work, name=f"{prefix}.Task"):
        n: int

    producing = await PostgresBackend.connect(failover_url, migrate=True, schema=prefix)
    consuming = await PostgresBackend.connect(failover_url, schema=prefix)
    worker: Worker[Any] = Worker(Queues, consuming)
    done: list[int] = []
    done_at: list[float] = []
    confirmed: list[tuple[int, float]] = []
    failed: list[BackendError] = []

    @worker.handler(Task)
    async def handle(job: Any, ctx: JobContext) -> None:
        done.append(job.n)
        done_at.append(time.monotonic())

    producer = await Producer.create(Queues, producing)
    stop = asyncio.Event()

    async def produce() -> None:
        n = 0
        while not stop.is_set():
            try:
                await producer.enqueue(Task(n=n))
            except BackendError as exc:  # the connection died under it: said, not hidden
                failed.append(exc)
                await asyncio.sleep(0.2)
            else:
                confirmed.append((n, time.monotonic()))
            n += 1

    running = asyncio.create_task(worker.run())
    producing_task = asyncio.create_task(produce())
    try:
        await asyncio.sleep(3)
        await asyncio.to_thread(_run, "stop-primary")
        await asyncio.to_thread(_run, "promote")
        promoted = time.monotonic()
        await asyncio.sleep(CONTINUE_WITHIN + 2)
        stop.set()
        await producing_task
        wanted = {n for n, _ in confirmed}
        async with asyncio.timeout(60):
            while not wanted <= set(done):
                await asyncio.sleep(0.1)
    finally:
        stop.set()
        worker.shutdown()
        await running
        await producing.close()
        await consuming.close()
    assert any(at < promoted + CONTINUE_WITHIN for n, at in confirmed if at > promoted)
    assert any(promoted < at < promoted + CONTINUE_WITHIN for at in done_at)
    assert len(done) - len(set(done)) <= 16  # at most the jobs running at the failover
    assert len(failed) <= 5, failed
