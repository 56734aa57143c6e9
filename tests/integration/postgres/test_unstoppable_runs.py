"""Runs of plain (``def``) handlers, whose threads cannot be stopped, keep their rows held and
heartbeated until they really end, whatever tries to let go of them:

- a cancel is a request: the row stays running until the thread ends, then it is cancelled;
  meanwhile no operator action (``Admin.retry``/``discard``, ``queuey failed retry
  --cancelled``) and no other worker can start it again;
- a worker shut down past its grace with ``close_backend_on_shutdown=True`` closes its backend
  only once the thread has ended (heartbeating meanwhile), so another worker in the same process
  never runs the job at the same time, and the first run's outcome is recorded."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from click.testing import CliRunner, Result

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import Admin, PostgresBackend
from queuey.cli import main

pytestmark = pytest.mark.postgres


class RunningQueues(QueueSet, prefix="cancelrun"):
    work = Queue()


class Slow(Job[RunningQueues], queue=RunningQueues.work, name="cancelrun.Slow"):
    n: int


Run = tuple[int, float, float]


async def cli(*argv: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, main, list(argv))


async def test_an_operator_cannot_restart_a_cancelled_plain_handler_while_it_runs(
    database_url: str, pg_schema: str
) -> None:
    # A short lease: without the heartbeat the row would be handed over within 2 s.
    first = PostgresBackend(database_url, schema=pg_schema, lease="1500ms", poll_interval="200ms")
    other = PostgresBackend(database_url, schema=pg_schema, lease="1500ms", poll_interval="200ms")
    admin = Admin(database_url, schema=pg_schema)
    runs: list[Run] = []
    started, release = threading.Event(), threading.Event()

    def slow(job: Slow, ctx: JobContext) -> None:
        began = time.monotonic()
        started.set()
        if ctx.attempt == 1:
            release.wait(30)  # ignores ctx.cancelled
        runs.append((ctx.attempt, began, time.monotonic()))

    async with first, other:
        producer = await Producer.create(RunningQueues, first)
        worker = Worker(RunningQueues, first, cancel_grace="100ms")
        rival = Worker(RunningQueues, other)
        worker.register(Slow, slow)
        rival.register(Slow, slow)
        job_id = await producer.enqueue(Slow(n=1))
        tasks = [asyncio.create_task(worker.run())]
        try:
            await asyncio.to_thread(started.wait, 10)
            tasks.append(asyncio.create_task(rival.run()))
            assert await admin.cancel(job_id) == "requested"
            await asyncio.sleep(0.5)
            assert await admin.retry(job_id, status="cancelled") == []
            assert await admin.discard(job_id, status="cancelled") == []
            url = ["--database-url", database_url, "--schema", pg_schema]
            result = await cli("failed", "retry", "--cancelled", job_id, *url)
            assert result.exit_code == 1 and "still runs" in result.stderr, result.stderr
            result = await cli("failed", "discard", "--cancelled", job_id, *url)
            assert result.exit_code == 1 and "still runs" in result.stderr, result.stderr
            info = await producer.job(job_id)
            assert info is not None and info.state == "running" and info.cancel_requested
            result = await cli("jobs", "show", job_id, *url)
            assert "running, cancel requested: it ends cancelled when its run ends" in (
                result.stdout
            ), result.stdout
            await asyncio.sleep(2.5)  # past the lease: the heartbeat keeps the row held
            info = await producer.job(job_id)
            assert info is not None and info.state == "running", "held while its thread runs"
            assert runs == []
            release.set()
            async with asyncio.timeout(10):
                while (info := await producer.job(job_id)) is None or info.state != "cancelled":
                    await asyncio.sleep(0.05)
            assert len(runs) == 1, "the thread ended: the row is cancelled now"
            assert worker.stats[RunningQueues.work.name].cancelled == 1
            assert await admin.retry(job_id, status="cancelled") != []  # ended: retry is free
            async with asyncio.timeout(15):
                while len(runs) < 2:
                    await asyncio.sleep(0.05)
        finally:
            release.set()
            worker.shutdown()
            rival.shutdown()
            await asyncio.gather(*tasks)
    (first_run, second_run) = sorted(runs, key=lambda run: run[1])
    assert second_run[1] >= first_run[2], "the retry started only after the first run ended"
    assert worker.settle_failures == 0 and rival.settle_failures == 0


async def test_closing_the_backend_under_a_running_plain_handler_hands_nothing_over(
    database_url: str, pg_schema: str
) -> None:
    first = PostgresBackend(database_url, schema=pg_schema, lease="1500ms", poll_interval="200ms")
    other = PostgresBackend(database_url, schema=pg_schema, lease="1500ms", poll_interval="200ms")
    runs: list[Run] = []
    started = threading.Event()

    def slow(job: Slow, ctx: JobContext) -> None:
        began = time.monotonic()
        started.set()
        time.sleep(4)  # more than two leases
        runs.append((ctx.attempt, began, time.monotonic()))

    await first.open()
    async with other:
        producer = await Producer.create(RunningQueues, other)
        worker = Worker(
            RunningQueues, first, shutdown_grace="300ms", close_backend_on_shutdown=True
        )
        rival = Worker(RunningQueues, other)
        worker.register(Slow, slow)
        rival.register(Slow, slow)
        job_id = await producer.enqueue(Slow(n=1))
        running = asyncio.create_task(worker.run())
        await asyncio.to_thread(started.wait, 10)
        rivalling = asyncio.create_task(rival.run())
        try:
            worker.shutdown()
            await asyncio.wait_for(running, 15)  # returns once the thread ended
            async with asyncio.timeout(5):
                while (info := await producer.job(job_id)) is None or info.state != "done":
                    await asyncio.sleep(0.05)
            await asyncio.sleep(2)  # a rival would have taken the row after its lease
        finally:
            rival.shutdown()
            await rivalling
    assert len(runs) == 1, runs
    assert info.attempts == 1 and info.redeliveries == 0
    assert worker.stats[RunningQueues.work.name].succeeded == 1
    assert worker.settle_failures == 0
