"""``queuey.sync.Producer`` on RabbitMQ: the async backend runs on a loop thread of its own
(``ThreadedBackend``); 8 threads enqueue at once and a worker receives every job; cancelling
is refused with a clear error."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import aio_pika
import pytest

from queuey import Job, JobContext, NotSupportedError, Queue, QueueSet, Worker, sync
from queuey.backends.rabbitmq import RabbitMqBackend
from tests.helpers import run_until

pytestmark = pytest.mark.rabbitmq


def make_set() -> tuple[type[QueueSet], type[Job[Any]]]:
    prefix = f"s{uuid.uuid4().hex[:8]}"

    class Mail(QueueSet, prefix=prefix):
        out = Queue(prefetch=32, max_priority=3)

    class Send(Job[Mail], queue=Mail.out, name=f"{prefix}.Send"):
        n: int

    return Mail, Send


async def delete_queues(url: str, names: list[str]) -> None:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        for name in names:
            await channel.queue_delete(name)
    finally:
        await connection.close()


async def test_eight_threads_enqueue_and_a_worker_gets_every_job(amqp_url: str) -> None:
    mail, send = make_set()
    threaded = sync.ThreadedBackend(RabbitMqBackend(amqp_url))
    ids: list[list[str]] = [[] for _ in range(8)]

    def produce() -> None:
        threaded.open()
        producer = sync.Producer.create(mail, threaded)
        barrier = threading.Barrier(8)

        def enqueue(slot: int) -> None:
            barrier.wait()
            for n in range(20):
                ids[slot].append(producer.enqueue(send(n=slot * 100 + n), priority=n % 4))
            ids[slot].extend(producer.enqueue_many([send(n=-slot), send(n=-slot - 50)]))

        threads = [threading.Thread(target=enqueue, args=(slot,)) for slot in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        producer.defer(send(n=999), "1s")
        with pytest.raises(NotSupportedError, match="RabbitMQ cannot remove a queued message"):
            producer.cancel(ids[0][0])

    names: list[str] = []
    try:
        await asyncio.to_thread(produce)
        names = threaded.backend.declared_queue_names()  # type: ignore[attr-defined]
        async with await RabbitMqBackend.connect(amqp_url) as backend:
            worker = Worker(mail, backend)
            seen: set[str] = set()

            @worker.handler(send)
            async def handle(job: Any, ctx: JobContext) -> None:
                seen.add(ctx.job_id)

            await run_until(worker, lambda: len(seen) == 8 * 22 + 1, timeout=30)
    finally:
        await asyncio.to_thread(threaded.close)
        await delete_queues(amqp_url, names)
    assert {job_id for slot in ids for job_id in slot} <= seen
