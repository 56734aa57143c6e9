"""Batch handlers meet batches and workflows alike on PostgreSQL (where the one
``settle_batch`` statement records a batch's outcomes) and in memory: a member that a batch
handler ends is counted in its batch (the callback released once, with the final counts), and
a success releases the steps waiting on the row (the jobs of a ``FanOut`` handled by a batch
handler feed the step after them, which runs once), checked from the handlers' own records.
RabbitMQ refuses both."""

from __future__ import annotations

from typing import Any

import pytest

from queuey import BatchContext, Fatal, Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.base import Backend
from queuey.batches import BatchProgress, batch
from queuey.fan_out import FanOut
from queuey.jobs import NoResult
from queuey.workflows import start
from tests.helpers import run_until


def _refuses(backend: Backend) -> None:
    if type(backend).__name__ == "RabbitMqBackend":
        pytest.skip("RabbitMQ refuses batches and workflows")


class StepQueues(QueueSet, prefix="bsteps"):
    work = Queue(prefetch=20)


class Item(Job[StepQueues], queue=StepQueues.work, name="bsteps.Item"):
    n: int


class Ended(Job[StepQueues], queue=StepQueues.work, name="bsteps.Ended"):
    progress: BatchProgress

    @classmethod
    def from_batch(cls, progress: BatchProgress) -> Ended:
        return cls(progress=progress)


class Split(Job[StepQueues, FanOut[NoResult]], queue=StepQueues.work, name="bsteps.Split"):
    count: int


class Joined(Job[StepQueues], queue=StepQueues.work, name="bsteps.Joined"):
    seen: int

    @classmethod
    def from_items(cls, results: list[Any]) -> Joined:  # a job of no result gives None
        return cls(seen=len(results))


def _worker(backend: Backend, ran: list[Any]) -> Worker[StepQueues]:
    worker = Worker(StepQueues, backend, concurrency=20)

    @worker.batch_handler(Item, size=4, wait="200ms")
    async def items(jobs: list[Item], ctx: BatchContext) -> list[BaseException | None]:
        ran.append(sorted(job.n for job in jobs))
        return [Fatal("odd one") if job.n == 13 else None for job in jobs]

    @worker.handler(Ended)
    async def ended(job: Ended, ctx: JobContext) -> None:
        ran.append(job.progress)

    @worker.handler(Split)
    async def split(job: Split, ctx: JobContext) -> FanOut[NoResult]:
        return FanOut(Item(n=n) for n in range(job.count))

    @worker.handler(Joined)
    async def joined(job: Joined, ctx: JobContext) -> None:
        ran.append(("joined", job.seen))

    return worker


async def test_batch_members_settled_at_once_release_their_callback_once(
    backend: Backend,
) -> None:
    _refuses(backend)
    producer = await Producer.create(StepQueues, backend)
    handle = await producer.enqueue_batch(
        batch(*[Item(n=n) for n in range(10, 18)]).on_complete(Ended.from_batch)
    )
    ran: list[Any] = []
    worker = _worker(backend, ran)
    stats = worker.stats[StepQueues.work.name]
    await run_until(worker, lambda: stats.succeeded + stats.dead >= 9)
    ends = [r for r in ran if isinstance(r, BatchProgress)]
    assert ends == [BatchProgress(batch_id=handle.batch_id, total=8, done=7, failed=1, pending=0)]
    assert sorted(n for r in ran if isinstance(r, list) for n in r) == list(range(10, 18))
    assert (stats.succeeded, stats.dead) == (8, 1)  # seven members and the callback


async def test_fanned_out_jobs_of_a_batch_handler_release_their_fan_in_step(
    backend: Backend,
) -> None:
    _refuses(backend)
    producer = await Producer.create(StepQueues, backend)
    flow = start(Split(count=6)).then_each(Joined.from_items)
    await producer.enqueue_workflow(flow)
    ran: list[Any] = []
    worker = _worker(backend, ran)
    await run_until(worker, lambda: ("joined", 6) in ran)
    assert sorted(n for r in ran if isinstance(r, list) for n in r) == list(range(6))
    assert ran.count(("joined", 6)) == 1
