"""``priority=`` on ``enqueue``, ``enqueue_after`` and ``enqueue_many``, on every backend: a
higher priority is delivered first, FIFO within one priority, and a priority outside the
queue's ``max_priority`` is refused before anything is published."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.base import Backend
from tests.helpers import run_until


def make_set() -> tuple[type[QueueSet], type[Job[Any]]]:
    prefix = f"p{uuid.uuid4().hex[:8]}"

    class Ranked(QueueSet, prefix=prefix):
        ranked = Queue(prefetch=1, max_priority=5)

    class Task(Job[Ranked], queue=Ranked.ranked, name=f"{prefix}.Task"):
        label: str

    return Ranked, Task


async def drain(
    backend: Backend, queues: type[QueueSet], task: type[Job[Any]], n: int
) -> list[Any]:
    """Run one job at a time until ``n`` ran; the labels and priorities, in run order."""
    worker = Worker(queues, backend, concurrency=1)
    order: list[tuple[str, int]] = []

    @worker.handler(task)
    async def handle(job: Any, ctx: JobContext) -> None:
        order.append((job.label, ctx.priority))

    await run_until(worker, lambda: len(order) == n)
    return order


async def test_higher_priorities_run_first_fifo_within_one(backend: Backend) -> None:
    queues, task = make_set()
    producer = await Producer.create(queues, backend)
    await producer.enqueue(task(label="low-1"))
    await producer.enqueue(task(label="top"), priority=5)
    await producer.enqueue_many([task(label="mid-1"), task(label="mid-2")], priority=3)
    await producer.enqueue(task(label="low-2"), priority=0)
    await producer.enqueue_after(task(label="later-mid"), 0, priority=3)
    order = await drain(backend, queues, task, 6)
    assert order == [
        ("top", 5),
        ("mid-1", 3),
        ("mid-2", 3),
        ("later-mid", 3),
        ("low-1", 0),
        ("low-2", 0),
    ]


async def test_a_delayed_job_keeps_its_priority(backend: Backend) -> None:
    queues, task = make_set()
    producer = await Producer.create(queues, backend)
    await producer.enqueue_after(task(label="delayed-top"), "200ms", priority=4)
    await producer.enqueue_many([task(label="b1"), task(label="b2")], delay="200ms", priority=1)
    await asyncio.sleep(1.5 if type(backend).__name__ == "RabbitMqBackend" else 0.5)
    order = await drain(backend, queues, task, 3)
    assert order == [("delayed-top", 4), ("b1", 1), ("b2", 1)]


@pytest.mark.parametrize("priority", [6, -1, 255])
async def test_an_out_of_range_priority_is_refused_naming_queue_and_range(
    backend: Backend, priority: int
) -> None:
    queues, task = make_set()
    producer = await Producer.create(queues, backend)
    name = task.job_queue().name
    expected = rf"priority {priority} is out of range for queue '{name}': 0\.\.5"
    with pytest.raises(ValueError, match=expected):
        await producer.enqueue(task(label="x"), priority=priority)
    with pytest.raises(ValueError, match=expected):
        await producer.enqueue_after(task(label="x"), "1s", priority=priority)
    with pytest.raises(ValueError, match=expected):
        await producer.enqueue_many([task(label="x")], priority=priority)
    assert await backend.count_pending(name) == 0
