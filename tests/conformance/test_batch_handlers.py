"""Batch handlers on every backend: jobs of one type handed over as a list (bounded by ``size``),
each item's outcome (success, retry, deferral, dead letter) honoured for its own job under its
retry policy, and an exception of the whole handler (or a malformed return) applied to every
item."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import pytest

from queuey import (
    BatchContext,
    Defer,
    Fatal,
    Job,
    Producer,
    Queue,
    QueueSet,
    Retry,
    RetryPolicy,
    Worker,
)
from queuey.backends.base import Backend
from tests.helpers import run_until


def kit(prefetch: int = 30) -> tuple[Any, Any]:
    prefix = f"b{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        work = Queue(prefetch=prefetch, max_priority=10)

    class Item(
        Job[Queues],
        queue=Queues.work,
        name=f"{prefix}.Item",
        retry=RetryPolicy.fixed(2, "300ms"),
    ):
        label: str
        then: str = "ack"  # ack | defer | fatal | retry | fail | retry-once

    return Queues, Item


def outcome_of(job: Any, ctx: BatchContext, index: int) -> BaseException | None:
    attempt = ctx.jobs[index].attempt
    match job.then:
        case "defer":
            return Defer("50ms", "later") if ctx.jobs[index].deferrals == 0 else None
        case "fatal":
            return Fatal("bad input")
        case "retry-once":
            return Retry("try again") if attempt == 1 else None
        case "fail":
            return ValueError(f"failed on attempt {attempt}")
    return None


async def test_each_item_ends_with_its_own_outcome(backend: Backend) -> None:
    queues, Item = kit()
    producer = await Producer.create(queues, backend)
    plan = ["ack", "defer", "fatal", "retry-once", "fail", "ack"]
    for n, then in enumerate(plan):
        await producer.enqueue(Item(label=f"j{n}", then=then))
    worker = Worker(queues, backend, concurrency=30, min_defer="50ms")
    batches: list[list[str]] = []
    runs: Counter[str] = Counter()

    @worker.batch_handler(Item, size=10, wait="500ms")
    async def handle(jobs: list[Any], ctx: BatchContext) -> list[BaseException | None]:
        assert len(ctx) == len(jobs)
        assert [c.job_type for c in ctx.jobs] == [Item.job_name()] * len(jobs)
        batches.append([job.label for job in jobs])
        runs.update(job.label for job in jobs)
        return [outcome_of(job, ctx, n) for n, job in enumerate(jobs)]

    stats = worker.stats[queues.work.name]
    await run_until(worker, lambda: stats.succeeded == 4 and stats.dead == 2, timeout=30)
    assert sorted(batches[0]) == sorted(f"j{n}" for n in range(6))  # one call took them all
    assert (stats.succeeded, stats.retried, stats.deferred, stats.dead) == (4, 2, 1, 2)
    reasons = {envelope.payload["label"]: reason for envelope, reason in worker.dead_letters}
    assert "bad input" in reasons["j2"]  # Fatal: at once, attempt 1
    assert "failed on attempt 2" in reasons["j4"]  # retried once under its policy, then dead
    assert runs == Counter(j0=1, j1=2, j2=1, j3=2, j4=2, j5=1)


async def test_batches_hold_at_most_size_jobs(backend: Backend) -> None:
    queues, Item = kit(prefetch=25)
    producer = await Producer.create(queues, backend)
    await producer.enqueue_many([Item(label=f"j{n}") for n in range(25)])
    worker = Worker(queues, backend, concurrency=25)
    sizes: list[int] = []
    seen: set[str] = set()

    @worker.batch_handler(Item, size=10, wait="300ms")
    async def handle(jobs: list[Any], ctx: BatchContext) -> None:
        sizes.append(len(jobs))
        seen.update(job.label for job in jobs)

    stats = worker.stats[queues.work.name]
    await run_until(worker, lambda: stats.succeeded == 25, timeout=30)
    assert seen == {f"j{n}" for n in range(25)}
    assert max(sizes) == 10 and sum(sizes) == 25


async def test_an_exception_of_the_handler_ends_every_item(backend: Backend) -> None:
    queues, Item = kit()
    producer = await Producer.create(queues, backend)
    for n in range(4):
        await producer.enqueue(Item(label=f"j{n}"))
    worker = Worker(queues, backend, concurrency=30)
    calls: list[list[int]] = []

    @worker.batch_handler(Item, size=4, wait="500ms")
    async def handle(jobs: list[Any], ctx: BatchContext) -> None:
        calls.append([c.attempt for c in ctx.jobs])
        if len(calls) == 1:
            raise ConnectionError("mail server down")

    stats = worker.stats[queues.work.name]
    await run_until(worker, lambda: stats.succeeded == 4, timeout=30)
    assert stats.retried == 4 and stats.dead == 0
    assert sorted(a for call in calls for a in call) == [1, 1, 1, 1, 2, 2, 2, 2]


async def test_a_malformed_return_fails_every_item(backend: Backend) -> None:
    queues, Item = kit()
    producer = await Producer.create(queues, backend)
    for n in range(3):
        await producer.enqueue(Item(label=f"j{n}"))
    worker = Worker(queues, backend, concurrency=30)

    @worker.batch_handler(Item, size=3, wait="500ms")
    async def handle(jobs: list[Any], ctx: BatchContext) -> Any:
        return [None] * (len(jobs) + 1)  # one outcome too many

    stats = worker.stats[queues.work.name]
    await run_until(worker, lambda: stats.dead == 3, timeout=30)
    assert stats.retried == 3 and stats.succeeded == 0
    reason = worker.dead_letters[-1][1]
    assert "returned a list of" in reason and "one entry per job" in reason


async def test_a_job_cancelled_while_its_batch_runs_ends_cancelled(backend: Backend) -> None:
    if type(backend).__name__ == "RabbitMqBackend":
        pytest.skip("RabbitMQ cannot reach a running job")
    queues, Item = kit()
    producer = await Producer.create(queues, backend)
    ids = [await producer.enqueue(Item(label=f"j{n}")) for n in range(3)]
    worker = Worker(queues, backend, concurrency=30, cancel_grace="200ms")
    started = asyncio.Event()
    ended: list[list[bool]] = []

    @worker.batch_handler(Item, size=3, wait="2s")
    async def handle(jobs: list[Any], ctx: BatchContext) -> None:
        started.set()
        target = next(c for c in ctx.jobs if c.job_id == ids[1])
        await target.cancellation()  # the batch goes on past the cancel grace
        await asyncio.sleep(0.5)
        ended.append([c.cancelled for c in ctx.jobs])

    running = asyncio.create_task(worker.run())
    stats = worker.stats[queues.work.name]
    try:
        await asyncio.wait_for(started.wait(), 10)
        assert await producer.cancel(ids[1]) == "requested"
        async with asyncio.timeout(10):
            while stats.succeeded + stats.cancelled < 3:
                assert ended or not stats.cancelled  # not ended before its batch returned
                await asyncio.sleep(0.01)
    finally:
        worker.shutdown()
        await running
    assert len(ended) == 1  # the batch ran to its end before the cancelled job ended
    assert (stats.succeeded, stats.cancelled, stats.retried, stats.dead) == (2, 1, 0, 0)
    assert worker.settle_failures == 0
    assert await backend.count_pending(queues.work.name) == 0
