"""Deferrals are bounded on every backend: a job that keeps deferring (``Defer(0)`` included)
never starves the jobs behind it, and ends dead-lettered after ``max_deferrals``."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from queuey import Defer, Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.base import Backend
from tests.helpers import run_until


def kit() -> tuple[type[QueueSet], type[Any]]:
    prefix = f"d{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        work = Queue(prefetch=1, max_priority=10)

    class Work(Job[Queues], queue=Queues.work, name=f"{prefix}.Work"):
        label: str
        defer_for: float = -1.0  # >= 0: always Defer(defer_for)

    return Queues, Work


@pytest.mark.parametrize("defer_for", [0.0, 0.01])
async def test_jobs_behind_deferring_ones_run(backend: Backend, defer_for: float) -> None:
    queues, Work = kit()
    producer = await Producer.create(queues, backend)
    for n in range(3):
        await producer.enqueue(Work(label=f"looper-{n}", defer_for=defer_for))
    for n in range(4):
        await producer.enqueue(Work(label=f"behind-{n}"))
    worker = Worker(queues, backend, concurrency=1)
    runs: list[str] = []

    @worker.handler(Work)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append(job.label)
        if job.defer_for >= 0:
            raise Defer(job.defer_for, "not yet")

    started = time.monotonic()
    await run_until(worker, lambda: sum(r.startswith("behind") for r in runs) == 4, timeout=20)
    assert sorted(r for r in runs if r.startswith("behind")) == [f"behind-{n}" for n in range(4)]
    # Each looper ran at most once per second (the shortest hold), however often it deferred.
    seconds = time.monotonic() - started
    for n in range(3):
        assert runs.count(f"looper-{n}") <= seconds + 1


async def test_a_job_that_keeps_deferring_is_dead_lettered_at_the_cap(backend: Backend) -> None:
    queues, Work = kit()
    producer = await Producer.create(queues, backend)
    looper = await producer.enqueue(Work(label="looper", defer_for=0))
    worker = Worker(queues, backend, concurrency=1, max_deferrals=3, min_defer="50ms")
    seen: list[int] = []

    @worker.handler(Work)
    async def handle(job: Any, ctx: JobContext) -> None:
        seen.append(ctx.deferrals)
        raise Defer(0, "waiting for the ledger")

    queue = Work.job_queue().name
    await run_until(worker, lambda: worker.stats[queue].dead == 1, timeout=20)
    assert seen == [0, 1, 2, 3]
    assert worker.stats[queue].deferred == 3
    ((envelope, reason),) = await backend.list_dead(queue)
    assert envelope.job_id == looper
    assert reason.startswith("deferred 3 times, the most max_deferrals (3) allows")
    assert "waiting for the ledger" in reason and "Worker(max_deferrals=...)" in reason
