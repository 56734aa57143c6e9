"""Handlers and jobs for the handler-process tests, at module level so that a handler process
(``plain_handlers="process"``) can import them."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from queuey import Job, JobContext, Queue, QueueSet, RetryPolicy


class ProcQueues(QueueSet, prefix="procs"):
    work = Queue(prefetch=4, retry=RetryPolicy.fixed(3, "50ms"))


class Stuck(Job[ProcQueues], queue=ProcQueues.work, name="procs.Stuck"):
    """Attempt 1 never returns (a busy loop, no safe point); later attempts return at once.
    Each step appends ``<attempt> <pid> <monotonic>`` to ``trace``."""

    trace: str
    stuck_attempts: int = 1


class Echo(Job[ProcQueues], queue=ProcQueues.work, name="procs.Echo"):
    n: int


def stuck(job: Stuck, ctx: JobContext) -> None:
    trace = Path(job.trace)
    while True:
        with trace.open("a") as out:
            out.write(f"{ctx.attempt} {os.getpid()} {time.monotonic()}\n")
        if ctx.attempt > job.stuck_attempts:
            return
        time.sleep(0.02)


def echo(job: Echo) -> int:
    return job.n


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


def sleep_for(seconds: float) -> str:
    time.sleep(seconds)
    return f"slept {seconds}"


async def _serve(url: str, schema: str, trace: str) -> None:
    """A worker process for the kill tests: runs plain handlers in processes; enqueues one
    stuck job and runs until killed."""
    from queuey import Producer, Worker
    from queuey.backends.postgres import PostgresBackend

    async with PostgresBackend(url, schema=schema) as backend:
        producer = await Producer.create(ProcQueues, backend)
        worker = Worker(ProcQueues, backend, concurrency=1, plain_handlers="process")
        worker.register(Stuck, stuck)
        await producer.enqueue(Stuck(trace=trace, stuck_attempts=99))
        await worker.run()


if __name__ == "__main__":
    import asyncio
    import sys

    asyncio.run(_serve(*sys.argv[1:4]))
