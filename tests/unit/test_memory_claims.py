"""The memory backend under a worker takes an envelope only when the worker has a free slot: a
busy worker never holds a job that an idle worker sharing the backend could run."""

from __future__ import annotations

import asyncio

from queuey import Job, JobContext, MemoryBackend, Producer, Queue, QueueSet, Worker


class MemQueues(QueueSet, prefix="memclaims"):
    work = Queue(prefetch=16)


class Task(Job[MemQueues], queue=MemQueues.work, name="memclaims.Task"):
    n: int
    seconds: float = 0.0


def recording(backend: MemoryBackend, name: str, runs: list[tuple[str, int]]) -> Worker[MemQueues]:
    worker = Worker(MemQueues, backend, concurrency=1)

    @worker.handler(Task)
    async def handle(job: Task, ctx: JobContext) -> None:
        runs.append((name, job.n))
        await asyncio.sleep(job.seconds)

    return worker


async def test_a_busy_worker_leaves_what_it_cannot_start_to_an_idle_one() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(MemQueues, backend)
    await producer.enqueue(Task(n=0, seconds=3))
    await producer.enqueue_many([Task(n=n) for n in range(1, 5)])
    runs: list[tuple[str, int]] = []
    busy, idle = recording(backend, "busy", runs), recording(backend, "idle", runs)
    busy_task = asyncio.create_task(busy.run())
    while busy.in_flight < 1:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert backend.pending(MemQueues.work.name) == 4, "nothing taken beyond the free slot"
    idle_task = asyncio.create_task(idle.run())
    async with asyncio.timeout(2):
        while idle.stats[MemQueues.work.name].succeeded < 4:
            await asyncio.sleep(0.01)
    for worker in (busy, idle):
        worker.shutdown(force=True)
    await asyncio.gather(busy_task, idle_task)
    assert sorted(n for name, n in runs if name == "idle") == [1, 2, 3, 4]
