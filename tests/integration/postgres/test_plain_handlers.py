"""Plain (``def``) handlers that cannot be stopped, on PostgreSQL: a run is never duplicated
while an earlier run of the same job still executes in its thread (past ``shutdown_grace`` or
past ``job_timeout``), ``job_timeout`` counts from the handler's start, threads stuck past their
timeout keep their slots (the worker claims less) instead of making later jobs time out, and
shutdown says what it could not stop."""

from __future__ import annotations

import asyncio
import itertools
import logging
import signal
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from psycopg import sql

from queuey import Job, JobContext, Producer, Queue, QueueSet, RetryPolicy, Worker
from queuey._outcome import Outcome, RetryAfter
from queuey._runtime.middleware import CallNext, Middleware
from queuey.backends.base import Delivery
from queuey.backends.postgres import PostgresBackend
from tests.integration.postgres.threads_app import Nap, ThreadQueues, runs_ddl
from tests.integration.postgres.worker_processes import (
    WorkerProcess,
    execute,
    message_rows,
    run_rows,
    wait_for,
)

pytestmark = pytest.mark.postgres


class StuckQueues(QueueSet, prefix="stuck"):
    work = Queue(prefetch=8, retry=RetryPolicy.fixed(2, "50ms"))


class Hang(Job[StuckQueues], queue=StuckQueues.work, name="stuck.Hang"):
    n: int


class Quick(Job[StuckQueues], queue=StuckQueues.work, name="stuck.Quick"):
    n: int


Run = tuple[int, int, float, float]
"""(n, attempt, started, ended), monotonic seconds."""


def overlapping(spans: list[tuple[float, float]]) -> bool:
    ordered = sorted(spans)
    return any(later[0] < earlier[1] for earlier, later in itertools.pairwise(ordered))


@pytest.fixture
def backend_settings() -> dict[str, Any]:
    return {"poll_interval": "300ms"}


async def test_a_plain_handler_outliving_the_grace_never_runs_twice_at_once(
    database_url: str, pg_schema: str
) -> None:
    await execute(database_url, runs_ddl(pg_schema))
    async with await PostgresBackend.connect(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(ThreadQueues, backend)
        await producer.enqueue(Nap(n=1, sleep_ms=4000))
    # A lease long enough that a loaded machine's process exit never outlasts it.
    first = WorkerProcess(database_url, pg_schema, concurrency=2, grace="500ms", lease="3s")
    first.start()
    second = WorkerProcess(database_url, pg_schema, concurrency=2)
    try:

        async def started() -> bool:
            return len(await run_rows(database_url, pg_schema)) == 1

        async def finished() -> bool:
            return any(row[4] is not None for row in await run_rows(database_url, pg_schema))

        await wait_for(started, timeout=30)
        second.start()
        first.signal(signal.SIGTERM)
        await first.exited(timeout=30)
        await wait_for(finished, timeout=30)
        runs = await run_rows(database_url, pg_schema)
    finally:
        first.stop()
        second.stop()
    assert first.exited_at is not None
    spans = [(began, first.exited_at if ended is None else ended) for _, _, _, began, ended in runs]
    assert not overlapping(spans), f"two runs of one job at once: {runs}"
    assert len({attempt for _, _, attempt, _, _ in runs}) == len(runs), runs
    # The process closed its backend only once the thread had ended (heartbeating the row
    # meanwhile): the run ended there, was recorded, and nothing was handed over.
    ((_, pid, _, _, ended),) = runs
    assert pid == first.pid and ended is not None and ended <= first.exited_at
    assert (await message_rows(database_url, pg_schema))[1][:3] == ("done", 1, 0)


async def test_threads_stuck_past_their_timeout_never_make_later_jobs_time_out(
    backend: PostgresBackend, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    producer = await Producer.create(StuckQueues, backend)
    worker = Worker(StuckQueues, backend, concurrency=2, job_timeout="500ms")
    release = threading.Event()
    runs: list[Run] = []

    @worker.handler(Hang)
    def hang(job: Hang, ctx: JobContext) -> None:
        began = time.monotonic()
        release.wait(10)
        runs.append((job.n, ctx.attempt, began, time.monotonic()))

    @worker.handler(Quick)
    def quick(job: Quick, ctx: JobContext) -> None:
        began = time.monotonic()
        time.sleep(0.1)
        runs.append((job.n, ctx.attempt, began, time.monotonic()))

    await producer.enqueue_many([Hang(n=1), Hang(n=2)])
    await producer.enqueue_many([Quick(n=n) for n in range(3, 9)])
    with caplog.at_level(logging.WARNING, logger="queuey.worker"):
        task = asyncio.create_task(worker.run())
        try:
            await asyncio.sleep(1.5)  # both stuck past their timeout: nothing else is claimed
            running = await execute(
                database_url,
                sql.SQL("SELECT count(*) FROM {} WHERE status = 'running'").format(
                    sql.Identifier(backend.statements.schema, "queue_message")
                ),
            )
            release.set()
            async with asyncio.timeout(20):
                while worker.stats[StuckQueues.work.name].succeeded < 8:
                    await asyncio.sleep(0.05)
        finally:
            release.set()
            worker.shutdown()
            await task
    assert running == [(2,)]
    quick_runs = sorted((n, attempt) for n, attempt, _, _ in runs if n >= 3)
    assert quick_runs == [(n, 1) for n in range(3, 9)], "every quick job ran once, in time"
    for n in (1, 2):
        mine = sorted((attempt, began, ended) for m, attempt, began, ended in runs if m == n)
        assert [attempt for attempt, _, _ in mine] == [1, 2]
        assert mine[1][1] >= mine[0][2], "the retry started only once the stuck thread ended"
    assert worker.stats[StuckQueues.work.name].retried == 2
    messages = [r.getMessage() for r in caplog.records]
    assert any("passed its timeout of 0.5s" in m and "2 of 2" in m for m in messages)
    assert any("every handler thread (2) is stuck" in m for m in messages)


async def test_the_timeout_of_a_plain_handler_counts_from_its_start(
    backend: PostgresBackend,
) -> None:
    """A plain handler that waited for a thread (the previous one stuck past its timeout)
    still gets its whole timeout once it starts."""
    producer = await Producer.create(StuckQueues, backend)
    outcomes: list[tuple[int, str, str]] = []

    def settled(envelope: Any, kind: str, text: str) -> None:
        outcomes.append((envelope.payload["n"], kind, text))

    worker = Worker(StuckQueues, backend, concurrency=1, job_timeout="600ms", on_settled=settled)
    release = threading.Event()

    @worker.handler(Hang)
    def hang(job: Hang, ctx: JobContext) -> None:
        release.wait(10)

    @worker.handler(Quick)
    def quick(job: Quick, ctx: JobContext) -> None:
        time.sleep(0.4)  # well within its timeout, counted from here

    await producer.enqueue(Hang(n=1))
    await producer.enqueue_many([Quick(n=n) for n in range(2, 5)])
    loop = asyncio.get_running_loop()
    loop.call_later(1.0, release.set)
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(20):
            while worker.stats[StuckQueues.work.name].succeeded < 4:
                await asyncio.sleep(0.05)
    finally:
        release.set()
        worker.shutdown()
        await task
    assert sorted(o for o in outcomes if o[0] >= 2) == [(n, "succeeded", "") for n in range(2, 5)]


class GiveUp(Middleware):
    """Gives up on a run after 200 ms (its own timeout) and asks for a retry."""

    async def around_call(self, delivery: Delivery, call_next: CallNext) -> Outcome:
        try:
            return await asyncio.wait_for(call_next(delivery), 0.2)
        except TimeoutError:
            return RetryAfter(delivery.envelope.next_attempt(), timedelta(0), "gave up")


async def test_a_run_given_up_on_while_its_thread_runs_is_not_retried_before_it_ends(
    backend: PostgresBackend, caplog: pytest.LogCaptureFixture
) -> None:
    producer = await Producer.create(StuckQueues, backend)
    worker = Worker(StuckQueues, backend, middleware=[GiveUp()])
    runs: list[Run] = []

    @worker.handler(Hang)
    def hang(job: Hang, ctx: JobContext) -> None:
        began = time.monotonic()
        if ctx.attempt == 1:
            time.sleep(1)
        runs.append((job.n, ctx.attempt, began, time.monotonic()))

    await producer.enqueue(Hang(n=1))
    with caplog.at_level(logging.WARNING, logger="queuey.worker"):
        task = asyncio.create_task(worker.run())
        try:
            async with asyncio.timeout(10):
                while len(runs) < 2:
                    await asyncio.sleep(0.05)
        finally:
            worker.shutdown()
            await task
    first, second = sorted(runs, key=lambda run: run[1])
    assert second[2] >= first[3], "the retry started only once the first thread ended"
    assert any("ended while its thread still runs" in r.getMessage() for r in caplog.records)


async def test_shutdown_keeps_a_running_plain_handler_held_and_says_so(
    backend: PostgresBackend, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    producer = await Producer.create(StuckQueues, backend)
    worker = Worker(StuckQueues, backend, shutdown_grace="300ms")
    release = threading.Event()
    started = threading.Event()

    @worker.handler(Hang)
    def hang(job: Hang, ctx: JobContext) -> None:
        started.set()
        release.wait(10)

    await producer.enqueue(Hang(n=1))
    with caplog.at_level(logging.WARNING, logger="queuey.worker"):
        task = asyncio.create_task(worker.run())
        try:
            await asyncio.to_thread(started.wait, 10)
            worker.shutdown()
            await asyncio.wait_for(task, 5)
            after_shutdown = await message_rows(database_url, backend.statements.schema)
        finally:
            release.set()

    async def done() -> bool:
        rows = await message_rows(database_url, backend.statements.schema)
        return rows[1][0] == "done"

    await wait_for(done, timeout=10)  # the thread ended: its run's outcome is recorded
    assert after_shutdown[1][:2] == ("running", 1), "not handed back while its thread runs"
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("1 handler thread(s) still running" in m for m in errors), errors
