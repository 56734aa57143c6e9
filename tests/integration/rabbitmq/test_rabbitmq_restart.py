"""A broker restart (``rabbitmqctl stop_app`` / ``start_app``) under a running worker: the
backend reconnects, consumers resume, nothing is lost, and the job in flight at the drop is
redelivered and counted in ``settle_failures``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from queuey import Defer, Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.rabbitmq import RabbitMqBackend, RabbitMqOptions

pytestmark = [pytest.mark.rabbitmq, pytest.mark.serial]

Connect = Callable[..., Awaitable[Any]]
Ctl = Callable[..., Awaitable[str]]

FAST_RECONNECT = RabbitMqOptions(
    reconnect_initial=timedelta(milliseconds=100), reconnect_max=timedelta(seconds=1)
)


async def _start_app(ctl: Ctl) -> None:
    await ctl("start_app")
    await ctl("await_startup")


async def test_broker_restart_under_a_running_worker_loses_nothing(
    connect: Connect, ctl: Ctl
) -> None:
    loop_errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, ctx: loop_errors.append(ctx))
    backend: RabbitMqBackend = await connect(FAST_RECONNECT)
    prefix = f"rs{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        work = Queue(prefetch=4)

    class Task(Job[Queues], queue=Queues.work, name=f"{prefix}.Task"):
        n: int
        defer_first: bool = False

    producer = await Producer.create(Queues, backend)
    worker = Worker(Queues, backend)
    seen: list[int] = []
    in_flight, release = asyncio.Event(), asyncio.Event()

    @worker.handler(Task)
    async def handle(job: Task, ctx: JobContext) -> None:
        if job.defer_first and ctx.deferrals == 0:
            raise Defer("2s")
        seen.append(job.n)
        if job.n == 0 and not in_flight.is_set():
            in_flight.set()
            await release.wait()  # still running when the broker goes away

    running = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(45):
            await producer.enqueue(Task(n=0))
            await in_flight.wait()
            await producer.enqueue_many([Task(n=n) for n in range(1, 20)])
            await producer.enqueue_many([Task(n=n, defer_first=True) for n in range(20, 25)])
            await ctl("stop_app")
            during = asyncio.create_task(producer.enqueue_many([Task(n=n) for n in range(25, 30)]))
            release.set()  # job 0 ends while the connection is down: its ack cannot be sent
            await asyncio.sleep(0.5)
            await _start_app(ctl)
            await during  # publishes waited for the reconnection
            while not set(range(30)) <= set(seen):
                assert not running.done(), running
                await asyncio.sleep(0.05)
            await producer.enqueue(Task(n=30))
            while 30 not in seen:
                await asyncio.sleep(0.05)
    finally:
        release.set()
        worker.shutdown()
        await running
    assert seen.count(0) >= 2  # the job in flight at the drop ran again
    assert worker.settle_failures >= 1
    assert backend.reconnections >= 1
    assert await backend.count_pending(Queues.work.name) == 0
    assert loop_errors == []
