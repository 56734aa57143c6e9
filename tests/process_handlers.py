"""Handlers and jobs for the handler-process tests, at module level so that a handler process
(``plain_handlers="process"``) can import them."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from queuey import Job, JobContext, Queue, QueueSet, RetryPolicy


class ProcQueues(QueueSet, prefix="procs"):
    work = Queue(prefetch=4, retry=RetryPolicy.fixed(3, "50ms"))
    once = Queue(prefetch=4)


class Stuck(Job[ProcQueues], queue=ProcQueues.work, name="procs.Stuck"):
    """Attempt 1 never returns (a busy loop, no safe point); later attempts return at once.
    Each step appends ``<attempt> <pid> <monotonic>`` to ``trace``. With ``grandchild`` (a
    path), a stuck attempt first starts a ``sleep`` process of its own and appends its pid
    there."""

    trace: str
    stuck_attempts: int = 1
    grandchild: str = ""


class Once(Job[ProcQueues], queue=ProcQueues.once, name="procs.Once"):
    """Not retried: its first failure dead-letters it."""

    n: int


class Crash(Job[ProcQueues], queue=ProcQueues.once, name="procs.Crash"):
    """Its handler ends its process with exit code 3 (no retry: dead-lettered at once)."""

    n: int


class Echo(Job[ProcQueues], queue=ProcQueues.work, name="procs.Echo"):
    n: int


def stuck(job: Stuck, ctx: JobContext) -> None:
    trace = Path(job.trace)
    if job.grandchild and ctx.attempt <= job.stuck_attempts:
        sleeper = subprocess.Popen(["sleep", "313"])
        with Path(job.grandchild).open("a") as out:
            out.write(f"{sleeper.pid}\n")
    while True:
        with trace.open("a") as out:
            out.write(f"{ctx.attempt} {os.getpid()} {time.monotonic()}\n")
        if ctx.attempt > job.stuck_attempts:
            return
        time.sleep(0.02)


def echo(job: Echo) -> int:
    return job.n


def once(job: Once) -> int:
    return job.n


def crash(job: Crash) -> None:
    os._exit(3)


def start_grandchild_and_hang(pidfile: str) -> None:
    """Start a ``sleep`` process, write its pid to ``pidfile``, then never return."""
    sleeper = subprocess.Popen(["sleep", "313"])
    Path(pidfile).write_text(f"{sleeper.pid}\n")
    while True:
        time.sleep(0.05)


class Unpicklable(Exception):
    """An exception that cannot be pickled back (it holds a lock)."""

    def __init__(self) -> None:
        super().__init__("holds a lock")
        self.lock = threading.Lock()


def _refuse() -> None:
    raise ValueError("cannot be rebuilt here")


class Unloadable(Exception):
    """An exception that pickles but cannot be unpickled."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_refuse, ())


def raise_unloadable() -> None:
    raise Unloadable("x")


def raise_unpicklable() -> None:
    raise Unpicklable()


def return_unpicklable() -> object:
    return threading.Lock()


def exit_hard() -> None:
    os._exit(3)


def grandchildren(pidfile: Path) -> list[int]:
    """The pids a handler wrote to ``pidfile`` (none when it does not exist)."""
    if not pidfile.exists():
        return []
    return [int(line) for line in pidfile.read_text().split()]


def lives(pid: int) -> bool:
    """Process ``pid`` exists and has not ended (a zombie, ended but not yet reaped by its
    parent, does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def kill_all(pidfile: Path) -> None:
    """SIGKILL the processes listed in ``pidfile`` that still run."""
    for pid in grandchildren(pidfile):
        if lives(pid):
            os.kill(pid, signal.SIGKILL)


def sleep_for(seconds: float) -> str:
    time.sleep(seconds)
    return f"slept {seconds}"


async def _serve(url: str, schema: str, trace: str, grandchild: str) -> None:
    """A worker process for the kill tests: runs plain handlers in processes; enqueues one
    stuck job (starting a grandchild process, its pid written to ``grandchild``) and runs
    until killed."""
    from queuey import Producer, Worker
    from queuey.backends.postgres import PostgresBackend

    async with PostgresBackend(url, schema=schema) as backend:
        producer = await Producer.create(ProcQueues, backend)
        worker = Worker(ProcQueues, backend, concurrency=1, plain_handlers="process")
        worker.register(Stuck, stuck)
        await producer.enqueue(Stuck(trace=trace, stuck_attempts=99, grandchild=grandchild))
        await worker.run()


if __name__ == "__main__":
    import asyncio
    import sys

    asyncio.run(_serve(*sys.argv[1:5]))
