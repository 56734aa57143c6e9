"""Plain handlers in processes (``plain_handlers="process"``), on PostgreSQL with real child
processes: a handler stuck past ``job_timeout`` is killed within a stated bound (its process
is gone, nothing of it runs on), its slot is free again at once (a worker of concurrency 1 goes
on), and the job is retried under its policy; a cancel or a shutdown past its grace kills the
process too; a handler that cannot be pickled is refused when it is registered."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from queuey import ConfigError, JobContext, Producer, Worker
from queuey.backends.postgres import PostgresBackend
from tests.helpers import ROOT, python_path
from tests.process_handlers import Echo, ProcQueues, Stuck, echo, stuck

pytestmark = pytest.mark.postgres

BOUND = 2.0
"""Seconds past the timeout by which the killed process must be gone (kill + reap is
milliseconds; the margin is for a loaded machine)."""


def steps(trace: Path) -> list[tuple[int, int, float]]:
    if not trace.exists():
        return []
    found = []
    for line in trace.read_text().splitlines():
        attempt, pid, when = line.split()
        found.append((int(attempt), int(pid), float(when)))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def until(predicate: Any, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_a_stuck_plain_handler_is_killed_past_its_timeout_and_retried(
    database_url: str, pg_schema: str, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="200ms") as backend:
        producer = await Producer.create(ProcQueues, backend)
        worker = Worker(
            ProcQueues, backend, concurrency=1, job_timeout="1s", plain_handlers="process"
        )
        worker.register(Stuck, stuck)
        job_id = await producer.enqueue(Stuck(trace=str(trace)))
        running = asyncio.create_task(worker.run())
        try:
            await until(lambda: any(a == 1 for a, _, _ in steps(trace)), 60)  # spawn + import
            first = [s for s in steps(trace) if s[0] == 1]
            began, pid = first[0][2], first[0][1]
            stats = worker.stats[ProcQueues.work.name]
            await until(lambda: stats.succeeded == 1, 60)
            info = await producer.job(job_id)
        finally:
            worker.shutdown()
            await running
    assert info is not None and (info.state, info.attempts) == ("done", 2)
    assert not alive(pid), "the stuck handler's process was killed"
    last_step = max(when for a, _, when in steps(trace) if a == 1)
    assert last_step <= began + 1.0 + BOUND, "nothing of the first run went on past the bound"
    retried = [s for s in steps(trace) if s[0] == 2]
    assert retried and retried[0][1] != pid, "the retry ran in a fresh process"
    assert retried[0][2] <= began + 1.0 + BOUND + 15, "the slot was free again"
    assert (stats.retried, stats.succeeded, stats.dead) == (1, 1, 0)


async def test_a_cancelled_or_shut_down_plain_handler_in_a_process_is_killed(
    database_url: str, pg_schema: str, tmp_path: Path
) -> None:
    cancelled_trace, shutdown_trace = tmp_path / "cancelled", tmp_path / "shutdown"
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="200ms") as backend:
        producer = await Producer.create(ProcQueues, backend)
        worker = Worker(
            ProcQueues,
            backend,
            concurrency=2,
            cancel_grace="200ms",
            shutdown_grace="300ms",
            plain_handlers="process",
        )
        worker.register(Stuck, stuck)
        doomed = await producer.enqueue(Stuck(trace=str(cancelled_trace), stuck_attempts=9))
        await producer.enqueue(Stuck(trace=str(shutdown_trace), stuck_attempts=9))
        running = asyncio.create_task(worker.run())
        try:
            await until(lambda: steps(cancelled_trace) and steps(shutdown_trace), 60)
            assert await producer.cancel(doomed) == "requested"
            stats = worker.stats[ProcQueues.work.name]
            await until(lambda: stats.cancelled == 1, 10)
            info = await producer.job(doomed)
            assert info is not None and info.state == "cancelled"
        finally:
            worker.shutdown()
            stopping = time.monotonic()
            await asyncio.wait_for(running, 15)
        stopped = time.monotonic()
        rows = {s[1] for s in steps(cancelled_trace)} | {s[1] for s in steps(shutdown_trace)}
        assert not any(alive(pid) for pid in rows), "both handler processes were killed"
        assert stopped - stopping <= 0.3 + BOUND, "shutdown did not wait for the stuck handler"
        assert await backend.count_pending(ProcQueues.work.name) == 1, "handed back"


async def test_a_handler_that_cannot_be_pickled_is_refused_at_registration(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        worker = Worker(ProcQueues, backend, plain_handlers="process")

        def local(job: Echo, ctx: JobContext) -> None:
            return None

        with pytest.raises(ConfigError, match="define it at module level"):
            worker.register(Echo, local)
        worker.register(Echo, echo)  # module level: fine

        async def on_the_loop(job: Echo) -> None:  # async handlers never leave the loop
            return None

        Worker(ProcQueues, backend, plain_handlers="process").register(Echo, on_the_loop)
    with pytest.raises(ConfigError, match="plain_handlers"):
        Worker(ProcQueues, backend, plain_handlers="fork")  # type: ignore[arg-type]


async def test_a_handler_process_ends_when_its_worker_process_is_killed(
    database_url: str, pg_schema: str, tmp_path: Path
) -> None:
    """kill -9 of the worker process: its handler process (stuck, never returning) sees its
    parent gone and ends within the bound, so nothing of the run goes on while the lease hands
    the job to another worker."""
    trace = tmp_path / "trace"
    env = {**os.environ, "PYTHONPATH": python_path()}
    args = [sys.executable, "-m", "tests.process_handlers", database_url, pg_schema, str(trace)]
    worker = subprocess.Popen(args, cwd=ROOT, env=env)
    try:
        await until(lambda: len(steps(trace)) > 2, 60)
        handler_pid = steps(trace)[-1][1]
        assert handler_pid != worker.pid
        worker.kill()
        worker.wait(10)
        killed = time.monotonic()
        await until(lambda: not alive(handler_pid), BOUND + 1)
        assert time.monotonic() - killed <= BOUND + 1
        count = len(steps(trace))
        await asyncio.sleep(0.3)
        assert len(steps(trace)) == count, "nothing of the run goes on"
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
