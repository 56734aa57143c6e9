"""Plain handlers in processes (``plain_handlers="process"``), on PostgreSQL with real child
processes: a handler stuck past ``job_timeout`` is killed within a stated bound (its process
is gone, nothing of it runs on), its slot is free again at once (a worker of concurrency 1 goes
on), and the job is retried under its policy; a cancel or a shutdown past its grace kills the
process too; whatever way a handler process is ended, the processes its handler started end
with it; a crashed process's exit code is recorded; a handler that cannot be pickled is refused
when it is registered; a script without the ``__main__`` guard gets an error naming it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from queuey import ConfigError, JobContext, Producer, Worker
from queuey.backends.postgres import PostgresBackend
from tests.helpers import ROOT, python_path, run_until
from tests.process_handlers import (
    Crash,
    Echo,
    ProcQueues,
    Stuck,
    crash,
    echo,
    grandchildren,
    kill_all,
    lives,
    stuck,
)

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


@pytest.fixture
def sleepers(tmp_path: Path) -> Iterator[Path]:
    """Where handlers write the pids of the processes they start; those still running at the
    end are killed (a failed test leaves none behind)."""
    path = tmp_path / "sleepers"
    yield path
    kill_all(path)


async def until(predicate: Any, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_a_stuck_plain_handler_is_killed_past_its_timeout_and_retried(
    database_url: str, pg_schema: str, tmp_path: Path, sleepers: Path
) -> None:
    trace = tmp_path / "trace"
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="200ms") as backend:
        producer = await Producer.create(ProcQueues, backend)
        worker = Worker(
            ProcQueues, backend, concurrency=1, job_timeout="1s", plain_handlers="process"
        )
        worker.register(Stuck, stuck)
        job_id = await producer.enqueue(Stuck(trace=str(trace), grandchild=str(sleepers)))
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
    assert not lives(pid), "the stuck handler's process was killed"
    (sleeper,) = grandchildren(sleepers)
    assert not lives(sleeper), "the process the handler started was killed with it"
    last_step = max(when for a, _, when in steps(trace) if a == 1)
    assert last_step <= began + 1.0 + BOUND, "nothing of the first run went on past the bound"
    retried = [s for s in steps(trace) if s[0] == 2]
    assert retried and retried[0][1] != pid, "the retry ran in a fresh process"
    assert retried[0][2] <= began + 1.0 + BOUND + 15, "the slot was free again"
    assert (stats.retried, stats.succeeded, stats.dead) == (1, 1, 0)


async def test_a_cancelled_or_shut_down_plain_handler_in_a_process_is_killed(
    database_url: str, pg_schema: str, tmp_path: Path, sleepers: Path
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
        doomed = await producer.enqueue(
            Stuck(trace=str(cancelled_trace), stuck_attempts=9, grandchild=str(sleepers))
        )
        await producer.enqueue(
            Stuck(trace=str(shutdown_trace), stuck_attempts=9, grandchild=str(sleepers))
        )
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
        assert not any(lives(pid) for pid in rows), "both handler processes were killed"
        started = grandchildren(sleepers)
        assert len(started) == 2
        assert not any(lives(pid) for pid in started), "and the processes they started"
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
    database_url: str, pg_schema: str, tmp_path: Path, sleepers: Path
) -> None:
    """kill -9 of the worker process: its handler process (stuck, never returning) sees its
    parent gone and ends within the bound, so nothing of the run goes on while the lease hands
    the job to another worker."""
    trace = tmp_path / "trace"
    env = {**os.environ, "PYTHONPATH": python_path()}
    args = [sys.executable, "-m", "tests.process_handlers", database_url, pg_schema]
    args += [str(trace), str(sleepers)]
    worker = subprocess.Popen(args, cwd=ROOT, env=env)
    try:
        await until(lambda: len(steps(trace)) > 2, 60)
        handler_pid = steps(trace)[-1][1]
        assert handler_pid != worker.pid
        worker.kill()
        worker.wait(10)
        killed = time.monotonic()
        await until(lambda: not lives(handler_pid), BOUND + 1)
        assert time.monotonic() - killed <= BOUND + 1
        (sleeper,) = grandchildren(sleepers)
        await until(lambda: not lives(sleeper), BOUND + 1)  # its handler's own process too
        count = len(steps(trace))
        await asyncio.sleep(0.3)
        assert len(steps(trace)) == count, "nothing of the run goes on"
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)


async def test_a_crashed_handler_process_is_recorded_with_its_exit_code(
    database_url: str, pg_schema: str
) -> None:
    """Every crash (several, so that no run reads the code before its process is reaped)."""
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="200ms") as backend:
        producer = await Producer.create(ProcQueues, backend)
        worker = Worker(ProcQueues, backend, concurrency=2, plain_handlers="process")
        worker.register(Crash, crash)
        ids = [await producer.enqueue(Crash(n=n)) for n in range(5)]
        stats = worker.stats[ProcQueues.once.name]
        await run_until(worker, lambda: stats.dead == 5, 120)
        infos = [await producer.job(job_id) for job_id in ids]
    for info in infos:
        assert info is not None and info.state == "failed"
        assert "process ended (exit code 3)" in (info.last_error or ""), info.last_error


NO_GUARD = """
import asyncio
import sys

from queuey import Producer, Worker
from queuey.backends.postgres import PostgresBackend
from tests.process_handlers import Once, ProcQueues, once


async def main(url: str, schema: str) -> None:
    async with PostgresBackend(url, schema=schema, poll_interval="200ms") as backend:
        worker = Worker(ProcQueues, backend, job_timeout="30s", plain_handlers="process")
        worker.register(Once, once)
        producer = await Producer.create(ProcQueues, backend)
        await producer.enqueue(Once(n=1))
        running = asyncio.create_task(worker.run())
        async with asyncio.timeout(60):
            while not worker.dead_letters:
                await asyncio.sleep(0.05)
        worker.shutdown()
        await running
        print("DEAD:", worker.dead_letters[0][1])


asyncio.run(main(sys.argv[1], sys.argv[2]))  # no `if __name__ == "__main__":` guard
"""


async def test_a_script_without_the_main_guard_gets_an_error_naming_it(
    database_url: str, pg_schema: str, tmp_path: Path
) -> None:
    """Each handler process imports the main module again: without the guard it would run the
    script (a second worker, a second enqueue); it stops at ``Worker(...)`` instead, and the
    job's error names the guard."""
    script = tmp_path / "no_guard.py"
    script.write_text(NO_GUARD)
    env = {**os.environ, "PYTHONPATH": python_path()}
    args = [sys.executable, str(script), database_url, pg_schema]
    done = await asyncio.to_thread(
        subprocess.run, args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert 'if __name__ == "__main__":' in done.stdout, done.stdout
    assert "while starting" in done.stdout
    assert "ConfigError" in done.stderr and "__main__" in done.stderr, done.stderr
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        assert await backend.count_pending(ProcQueues.once.name) == 0, "enqueued once only"
