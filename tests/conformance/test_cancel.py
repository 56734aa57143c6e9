"""``Producer.cancel`` on every backend: a pending or scheduled job never runs; a running one
is told (``ctx.cancelled``), stopped, and ends cancelled, not retried, its late outcome refused;
RabbitMQ refuses with a clear error."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from queuey import (
    Job,
    JobContext,
    NotSupportedError,
    Producer,
    Queue,
    QueueSet,
    RetryPolicy,
    Worker,
)
from queuey.backends.base import Backend
from tests.helpers import run_until


def make_set() -> tuple[type[QueueSet], type[Job[Any]]]:
    prefix = f"k{uuid.uuid4().hex[:8]}"

    class Cancelling(QueueSet, prefix=prefix):
        work = Queue(prefetch=4, retry=RetryPolicy.fixed(3, "50ms"))

    class Task(Job[Cancelling], queue=Cancelling.work, name=f"{prefix}.Task"):
        label: str
        cooperative: bool = True

    return Cancelling, Task


def rabbit(backend: Backend) -> bool:
    return type(backend).__name__ == "RabbitMqBackend"


async def test_pending_and_scheduled_jobs_never_run(backend: Backend) -> None:
    queues, task = make_set()
    producer = await Producer.create(queues, backend)
    doomed = await producer.enqueue(task(label="doomed"))
    later = await producer.enqueue_after(task(label="later"), "300ms")
    kept = await producer.enqueue(task(label="kept"))
    if rabbit(backend):
        with pytest.raises(NotSupportedError, match="RabbitMQ cannot remove a queued message"):
            await producer.cancel(doomed)
        return
    assert await producer.cancel(doomed) == "cancelled"
    assert await producer.cancel(later) == "cancelled"
    assert await producer.cancel(doomed) == "not_found"
    assert await producer.cancel(str(uuid.uuid4())) == "not_found"
    worker = Worker(queues, backend)
    ran: list[str] = []

    @worker.handler(task)
    async def handle(job: Any, ctx: JobContext) -> None:
        ran.append(job.label)

    await run_until(worker, lambda: ran == ["kept"])
    await asyncio.sleep(0.5)  # past "later"'s delay
    assert ran == ["kept"] and kept
    assert await producer.cancel(kept) == "not_found"  # done: nothing to cancel


@pytest.mark.parametrize("cooperative", [True, False])
async def test_a_running_job_is_stopped_and_ends_cancelled(
    backend: Backend, cooperative: bool
) -> None:
    if rabbit(backend):
        pytest.skip("RabbitMQ cannot reach a running job")
    queues, task = make_set()
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend, cancel_grace="300ms")
    started = asyncio.Event()
    seen: list[str] = []

    @worker.handler(task)
    async def handle(job: Any, ctx: JobContext) -> None:
        started.set()
        if job.cooperative:
            await ctx.cancellation()  # a safe point
            seen.append(f"stopped cleanly, cancelled={ctx.cancelled}")
            return
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append(f"task cancelled, cancelled={ctx.cancelled}")
            raise

    job_id = await producer.enqueue(task(label="long", cooperative=cooperative))
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 10)
        assert await producer.cancel(job_id) == "requested"
        stats = worker.stats[task.job_queue().name]
        async with asyncio.timeout(10):
            while stats.cancelled == 0:
                await asyncio.sleep(0.02)
    finally:
        worker.shutdown()
        await running
    expected = "stopped cleanly" if cooperative else "task cancelled"
    assert seen == [f"{expected}, cancelled=True"]
    assert (stats.succeeded, stats.retried, stats.dead, stats.cancelled) == (0, 0, 0, 1)
    assert worker.settle_failures == 0
    assert await producer.cancel(job_id) == "not_found"
    assert await backend.count_pending(task.job_queue().name) == 0


async def test_a_plain_handler_sees_ctx_cancelled_in_its_thread(backend: Backend) -> None:
    if rabbit(backend):
        pytest.skip("RabbitMQ cannot reach a running job")
    queues, task = make_set()
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend, cancel_grace="10s")
    loop = asyncio.get_running_loop()
    started = asyncio.Event()
    seen: list[bool] = []

    @worker.handler(task)
    def handle(job: Any, ctx: JobContext) -> None:
        loop.call_soon_threadsafe(started.set)
        for _ in range(500):  # a loop with a safe point between steps
            if ctx.cancelled:
                seen.append(True)
                return
            time.sleep(0.01)

    job_id = await producer.enqueue(task(label="plain"))
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 10)
        assert await producer.cancel(job_id) == "requested"
        stats = worker.stats[task.job_queue().name]
        async with asyncio.timeout(5):
            while stats.cancelled == 0:
                await asyncio.sleep(0.02)
    finally:
        worker.shutdown()
        await running
    assert seen == [True]


async def test_a_cancelled_plain_handler_that_runs_on_keeps_its_job_held_until_it_ends(
    backend: Backend,
) -> None:
    """A cancel cannot stop a plain handler's thread: the job stays running (held, never
    claimed by another worker, never handed back) until the thread ends, then ends cancelled;
    it runs once."""
    if rabbit(backend):
        pytest.skip("RabbitMQ cannot reach a running job")
    queues, task = make_set()
    producer = await Producer.create(queues, backend)
    first = Worker(queues, backend, cancel_grace="50ms")
    second = Worker(queues, backend)
    loop = asyncio.get_running_loop()
    started = asyncio.Event()
    runs: list[tuple[str, float, float]] = []

    def stubborn(job: Any, ctx: JobContext) -> None:
        began = time.monotonic()
        loop.call_soon_threadsafe(started.set)
        time.sleep(1.5)  # ignores ctx.cancelled: no safe point
        runs.append((ctx.job_id, began, time.monotonic()))

    first.register(task, stubborn)
    second.register(task, stubborn)
    job_id = await producer.enqueue(task(label="stubborn", cooperative=False))
    running = asyncio.create_task(first.run())
    other: asyncio.Task[None] | None = None
    try:
        await asyncio.wait_for(started.wait(), 10)
        other = asyncio.create_task(second.run())
        assert await producer.cancel(job_id) == "requested"
        await asyncio.sleep(0.4)  # past the cancel grace: the run gave up, its thread did not
        info = await producer.job(job_id)
        assert info is not None and info.state == "running", "held while its thread runs"
        assert info.cancel_requested
        assert await producer.cancel(job_id) == "requested", "asked again: still running"
        stats = first.stats[task.job_queue().name]
        async with asyncio.timeout(10):
            while stats.cancelled == 0:
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # time for the second worker to take it, were it free
    finally:
        first.shutdown()
        second.shutdown()
        await running
        if other is not None:
            await other
    info = await producer.job(job_id)
    assert info is not None and info.state == "cancelled" and not info.cancel_requested
    assert len(runs) == 1, runs
    assert first.settle_failures == 0
    assert second.stats[task.job_queue().name].acked == 0
