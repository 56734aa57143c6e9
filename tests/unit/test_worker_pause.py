"""``Worker`` pause/resume (the shared consume loop): a paused worker takes nothing, producers
still enqueue, and resume picks everything up."""

from __future__ import annotations

import asyncio

import pytest

from queuey import Job, MemoryBackend, Producer, Queue, QueueSet, Worker


class PauseQueues(QueueSet, prefix="pause"):
    work = Queue(prefetch=2)


class Step(Job[PauseQueues], queue=PauseQueues.work):
    n: int


@pytest.mark.looptime
async def test_a_worker_started_paused_takes_nothing_until_resumed() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(PauseQueues, backend)
    worker = Worker(PauseQueues, backend, paused=True)
    done: list[int] = []

    @worker.handler(Step)
    async def handle(job: Step) -> None:
        done.append(job.n)

    task = asyncio.create_task(worker.run())
    for n in range(3):
        await producer.enqueue(Step(n=n))
    await asyncio.sleep(3600)
    assert worker.paused and done == []
    assert backend.pending(PauseQueues.work.name) == 3
    worker.resume()
    async with asyncio.timeout(10):
        await backend.wait_idle()
    assert not worker.paused
    worker.shutdown()
    await task
    assert sorted(done) == [0, 1, 2]


@pytest.mark.looptime
async def test_pause_lets_running_jobs_finish_and_holds_the_rest() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(PauseQueues, backend)
    worker = Worker(PauseQueues, backend, concurrency=1)
    started = asyncio.Event()
    done: list[int] = []

    @worker.handler(Step)
    async def handle(job: Step) -> None:
        started.set()
        await asyncio.sleep(10)
        done.append(job.n)

    task = asyncio.create_task(worker.run())
    await producer.enqueue(Step(n=1))
    await started.wait()
    worker.pause()
    await producer.enqueue(Step(n=2))
    await asyncio.sleep(600)
    assert done == [1]
    assert worker.in_flight == 0
    assert backend.pending(PauseQueues.work.name) == 1  # taken before the pause: handed back
    worker.resume()
    async with asyncio.timeout(60):
        await backend.wait_idle()
    worker.shutdown()
    await task
    assert done == [1, 2]


async def test_shutdown_while_paused_returns() -> None:
    worker = Worker(PauseQueues, MemoryBackend(), paused=True)
    task = asyncio.create_task(worker.run())
    await asyncio.sleep(0.01)
    worker.shutdown()
    async with asyncio.timeout(5):
        await task
