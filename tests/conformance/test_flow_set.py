"""Flow control at run time on memory and PostgreSQL: a pause is the limit zero (nothing of the
queue starts, other queues run on, everything starts on resume), and limits set at run time
replace the declared ones at the next claim until reset. PostgreSQL is driven through
``Admin`` (what ``queuey queues`` runs), memory through the backend's own methods."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.base import Backend
from queuey.backends.memory import MemoryBackend
from queuey.limits import LimitSpec, parse_limit


def make_set() -> tuple[type[QueueSet], type[Job[Any]], type[Job[Any]]]:
    prefix = f"s{uuid.uuid4().hex[:8]}"

    class Flowing(QueueSet, prefix=prefix):
        work = Queue(prefetch=8)
        other = Queue(prefetch=8)

    class Work(Job[Flowing], queue=Flowing.work, name=f"{prefix}.Work"):
        n: int

    class Other(Job[Flowing], queue=Flowing.other, name=f"{prefix}.Other"):
        n: int

    return Flowing, Work, Other


class Control:
    """Pause and set limits on ``backend``, as an operator would."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def _admin(self) -> Any:
        from queuey.backends.postgres import Admin

        pg: Any = self.backend
        return Admin(pg.conninfo, schema=pg.statements.schema, channel=pg.channel)

    async def pause(self, queue: str) -> bool:
        if isinstance(self.backend, MemoryBackend):
            return await self.backend.pause_queue(queue)
        return bool(await self._admin().pause_queue(queue))

    async def resume(self, queue: str) -> bool:
        if isinstance(self.backend, MemoryBackend):
            return await self.backend.resume_queue(queue)
        return bool(await self._admin().resume_queue(queue))

    async def set_limits(self, queue: str, limits: Sequence[LimitSpec] | None) -> None:
        if isinstance(self.backend, MemoryBackend):
            await self.backend.set_limits(queue, limits)
        else:
            await self._admin().set_limits(queue, limits)


def skip_rabbitmq(backend: Backend) -> None:
    if type(backend).__name__ == "RabbitMqBackend":
        pytest.skip("RabbitMQ refuses flow limits (ConfigError); pauses are PostgreSQL's")


async def test_a_pause_is_the_limit_zero(backend: Backend) -> None:
    skip_rabbitmq(backend)
    queues, work, other = make_set()
    control = Control(backend)
    worker = Worker(queues, backend, concurrency=4)
    handled: list[tuple[str, int]] = []

    @worker.handler(work)
    async def handle(job: Any, ctx: JobContext) -> None:
        handled.append(("work", job.n))

    @worker.handler(other)
    async def handle_other(job: Any, ctx: JobContext) -> None:
        handled.append(("other", job.n))

    producer = await Producer.create(queues, backend)
    work_queue = queues.all()[0].config.name
    assert await control.pause(work_queue) is True
    task = asyncio.create_task(worker.run())
    try:
        await producer.enqueue_many([work(n=n) for n in range(3)])
        await producer.enqueue(other(n=9))
        async with asyncio.timeout(10):
            while ("other", 9) not in handled:
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)
        assert handled == [("other", 9)]  # the paused queue: nothing started
        assert await control.resume(work_queue) is True
        async with asyncio.timeout(10):
            while len(handled) < 4:
                await asyncio.sleep(0.02)
    finally:
        worker.shutdown()
        await task
    assert sorted(handled) == [("other", 9), ("work", 0), ("work", 1), ("work", 2)]


async def test_limits_set_at_run_time_replace_the_declared_until_reset(
    backend: Backend,
) -> None:
    skip_rabbitmq(backend)
    queues, work, _ = make_set()
    control = Control(backend)
    work_queue = queues.all()[0].config.name
    producer = await Producer.create(queues, backend)

    async def peak_of(first: int) -> int:
        worker = Worker(queues, backend, queues=[queues.all()[0]], concurrency=6)
        running, peak, done = [0], [0], asyncio.Event()

        @worker.handler(work)
        async def handle(job: Any, ctx: JobContext) -> None:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            await asyncio.sleep(0.05)
            running[0] -= 1
            if job.n == first + 5:
                done.set()

        await producer.enqueue_many([work(n=n) for n in range(first, first + 6)])
        task = asyncio.create_task(worker.run())
        try:
            await asyncio.wait_for(done.wait(), 20)
        finally:
            worker.shutdown()
            await task
        return peak[0]

    await control.set_limits(work_queue, [parse_limit("concurrency 2")])
    assert await peak_of(0) == 2
    await control.set_limits(work_queue, None)
    assert await peak_of(100) > 2
