"""Batches behave alike on PostgreSQL and in memory: progress counts each member's end, a
member's handler grows its own batch, ``on_complete`` runs once with the final counts whatever
the outcome, ``on_success`` only when every member succeeded (else it ends cancelled); adding
to an ended batch is refused; RabbitMQ refuses a batch."""

from __future__ import annotations

import asyncio

import pytest

from queuey import (
    BatchEndedError,
    Job,
    JobContext,
    NotSupportedError,
    Producer,
    Queue,
    QueueSet,
    RetryPolicy,
    UnknownBatchError,
    Worker,
)
from queuey.backends.base import Backend
from queuey.batches import BatchProgress, batch


class BatchQueues(QueueSet, prefix="batches"):
    work = Queue(prefetch=16, retry=RetryPolicy.none())


class Part(Job[BatchQueues], queue=BatchQueues.work, name="batches.Part"):
    n: int
    grow: int = 0  # members this one adds to its own batch
    fail: bool = False


class Report(Job[BatchQueues], queue=BatchQueues.work, name="batches.Report"):
    kind: str
    progress: BatchProgress

    @classmethod
    def on_complete(cls, progress: BatchProgress) -> Report:
        return cls(kind="complete", progress=progress)

    @classmethod
    def on_success(cls, progress: BatchProgress) -> Report:
        return cls(kind="success", progress=progress)


def worker_for(
    backend: Backend, producer: Producer[BatchQueues], reports: list[Report], ran: list[int]
) -> Worker[BatchQueues]:
    worker = Worker(BatchQueues, backend, concurrency=8)

    @worker.handler(Part)
    async def part(job: Part, ctx: JobContext) -> None:
        assert ctx.batch_id is not None
        ran.append(job.n)
        await asyncio.sleep(0.01 * (job.n % 3))
        if job.grow:
            grown = [Part(n=job.n * 100 + i) for i in range(job.grow)]
            await producer.batch(ctx.batch_id).add(*grown)
        if job.fail:
            raise ValueError(f"part {job.n} failed")

    @worker.handler(Report)
    async def report(job: Report, ctx: JobContext) -> None:
        assert ctx.batch_id is None  # a callback is not a member
        reports.append(job)

    return worker


async def _until(check: object, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_batch_progress_growth_and_callbacks_alike(backend: Backend) -> None:
    producer = await Producer.create(BatchQueues, backend)
    jobs = batch(*(Part(n=n, grow=2 if n == 3 else 0) for n in range(1, 9)))
    jobs = jobs.on_success(Report.on_success).on_complete(Report.on_complete)
    if type(backend).__name__ == "RabbitMqBackend":
        with pytest.raises(NotSupportedError, match="cannot run batches"):
            await producer.enqueue_batch(jobs)
        return
    handle = await producer.enqueue_batch(jobs)
    before = await handle.progress()
    assert (before.total, before.done, before.failed, before.pending) == (8, 0, 0, 8)
    assert not before.ended
    reports: list[Report] = []
    ran: list[int] = []
    worker = worker_for(backend, producer, reports, ran)
    running = asyncio.create_task(worker.run())
    try:
        await _until(lambda: len(reports) == 2)
        await asyncio.sleep(0.3)  # a third callback would run by now
    finally:
        worker.shutdown()
        await running
    assert sorted(ran) == [1, 2, 3, 4, 5, 6, 7, 8, 300, 301]  # each member ran once
    assert sorted(r.kind for r in reports) == ["complete", "success"]
    for r in reports:
        assert r.progress == BatchProgress(
            batch_id=handle.batch_id, total=10, done=10, failed=0, pending=0
        )
    after = await handle.progress()
    assert after.ended and (after.total, after.done) == (10, 10)
    with pytest.raises(BatchEndedError, match=handle.batch_id):
        await handle.add(Part(n=99))
    assert await handle.progress() == after


async def test_a_failed_member_cancels_on_success_and_completes(backend: Backend) -> None:
    if type(backend).__name__ == "RabbitMqBackend":
        pytest.skip("RabbitMQ refuses batches")
    producer = await Producer.create(BatchQueues, backend)
    members = [Part(n=n, fail=n == 2) for n in range(1, 6)]
    jobs = batch(*members).on_success(Report.on_success).on_complete(Report.on_complete)
    handle = await producer.enqueue_batch(jobs)
    reports: list[Report] = []
    ran: list[int] = []
    worker = worker_for(backend, producer, reports, ran)
    running = asyncio.create_task(worker.run())
    try:
        await _until(lambda: len(reports) == 1)
        await asyncio.sleep(0.3)
    finally:
        worker.shutdown()
        await running
    (only,) = reports
    assert only.kind == "complete"
    assert (await handle.progress()).model_dump() == only.progress.model_dump()
    assert (only.progress.total, only.progress.done, only.progress.failed) == (5, 4, 1)
    assert sorted(ran) == [1, 2, 3, 4, 5]


async def test_cancelled_members_count_as_failed(backend: Backend) -> None:
    if type(backend).__name__ == "RabbitMqBackend":
        pytest.skip("RabbitMQ refuses batches")
    producer = await Producer.create(BatchQueues, backend)
    jobs = batch(Part(n=1), Part(n=2)).on_complete(Report.on_complete)
    handle = await producer.enqueue_batch(jobs)
    assert len(handle.job_ids) == 2
    for job_id in handle.job_ids:
        assert await producer.cancel(job_id) == "cancelled"
    progress = await handle.progress()
    assert (progress.failed, progress.pending, progress.ended) == (2, 0, True)
    reports: list[Report] = []
    worker = worker_for(backend, producer, reports, [])
    running = asyncio.create_task(worker.run())
    try:
        await _until(lambda: len(reports) == 1)
    finally:
        worker.shutdown()
        await running
    assert reports[0].progress.failed == 2
    with pytest.raises(UnknownBatchError):
        await producer.batch("00000000-0000-4000-8000-000000000000").progress()
