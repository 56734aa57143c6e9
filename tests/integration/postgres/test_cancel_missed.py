"""A cancel whose notification a worker never receives still stops the run: the heartbeat
finds the row no longer running under this worker and stops it as a cancel does (here with
``poll_only=True``, so no notification can arrive at all)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend

pytestmark = pytest.mark.postgres


class MissedQueues(QueueSet, prefix="missed"):
    work = Queue()


class Long(Job[MissedQueues], queue=MissedQueues.work, name="missed.Long"):
    n: int


async def test_a_cancel_without_its_notification_is_found_by_the_heartbeat(
    database_url: str, pg_schema: str
) -> None:
    backend = PostgresBackend(database_url, schema=pg_schema, poll_only=True, lease="1500ms")
    async with backend:
        producer = await Producer.create(MissedQueues, backend)
        worker = Worker(MissedQueues, backend, cancel_grace="200ms")
        started, stopped = asyncio.Event(), asyncio.Event()

        @worker.handler(Long)
        async def handle(job: Long, ctx: JobContext) -> None:
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                stopped.set()
                raise

        job_id = await producer.enqueue(Long(n=1))
        running = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(started.wait(), 10)
            assert await producer.cancel(job_id) == "requested"
            await asyncio.wait_for(stopped.wait(), 5)  # a heartbeat every 0.5 s
        finally:
            worker.shutdown()
            await asyncio.wait_for(running, 10)
        stats: Any = worker.stats[MissedQueues.work.name]
        assert (stats.succeeded, stats.retried, stats.dead, stats.cancelled) == (0, 0, 0, 1)
        assert await producer.cancel(job_id) == "not_found"


@pytest.mark.parametrize("ending", ["returns", "raises"])
async def test_an_outcome_refused_because_of_a_missed_cancel_counts_as_cancelled(
    database_url: str, pg_schema: str, ending: str
) -> None:
    """The handler ends (a success or a retry) before any heartbeat: its settle is refused by
    the fence, and the backend, asked why, says the job was cancelled: the run is recorded as
    cancelled, not as a failure to record its outcome."""
    backend = PostgresBackend(database_url, schema=pg_schema, poll_only=True)  # lease 5 min
    async with backend:
        producer = await Producer.create(MissedQueues, backend)
        worker = Worker(MissedQueues, backend)
        started, go = asyncio.Event(), asyncio.Event()

        @worker.handler(Long)
        async def handle(job: Long, ctx: JobContext) -> None:
            started.set()
            await go.wait()
            if ending == "raises":
                raise RuntimeError("boom")

        job_id = await producer.enqueue(Long(n=1))
        running = asyncio.create_task(worker.run())
        stats: Any = worker.stats[MissedQueues.work.name]
        try:
            await asyncio.wait_for(started.wait(), 10)
            assert await producer.cancel(job_id) == "requested"
            go.set()
            async with asyncio.timeout(10):
                while stats.cancelled == 0 and worker.settle_failures == 0:
                    await asyncio.sleep(0.02)
        finally:
            worker.shutdown()
            await asyncio.wait_for(running, 10)
        assert (stats.succeeded, stats.retried, stats.cancelled) == (0, 0, 1)
        assert worker.settle_failures == 0
        assert worker.in_flight == 0
