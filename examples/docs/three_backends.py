"""Concepts: one application, three transports. The same producer and worker code runs on
PostgreSQL, RabbitMQ and in memory; only the backend differs.

Reads ``QUEUEY_DATABASE_URL``, ``QUEUEY_SCHEMA`` and ``QUEUEY_AMQP_URL``; ``QUEUEY_PREFIX``
(default ``tour``) names the queues, so that runs sharing a broker do not meet.
"""

from __future__ import annotations

import asyncio
import os

from queuey import Backend, Job, JobContext, MemoryBackend, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.backends.rabbitmq import RabbitMqBackend

DATABASE_URL = os.environ.get(
    "QUEUEY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
SCHEMA = os.environ.get("QUEUEY_SCHEMA", "queuey")
AMQP_URL = os.environ.get("QUEUEY_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")


class Tour(QueueSet, prefix=os.environ.get("QUEUEY_PREFIX", "tour")):
    greetings = Queue()


class Greet(Job[Tour], queue=Tour.greetings, name="tour.Greet"):
    name: str


# --8<-- [start:tour]
async def tour(backend: Backend) -> list[str]:
    """Enqueue two jobs, one of them 1 s later, and run a worker until both ran."""
    greeted: list[str] = []
    producer = await Producer.create(Tour, backend)
    await producer.enqueue(Greet(name="Ada"))
    await producer.enqueue_after(Greet(name="Grace"), "1s")
    worker = Worker(Tour, backend)

    @worker.handler(Greet)
    async def greet(job: Greet, ctx: JobContext) -> None:
        greeted.append(job.name)
        if len(greeted) == 2:
            worker.shutdown()

    await worker.run()
    return greeted


async def main() -> None:
    print(await tour(MemoryBackend()))
    async with await PostgresBackend.connect(DATABASE_URL, schema=SCHEMA, migrate=True) as pg:
        print(await tour(pg))
    async with RabbitMqBackend(AMQP_URL) as rabbit:  # pip install 'queuey-jobs[rabbitmq]'
        print(await tour(rabbit))


# --8<-- [end:tour]


if __name__ == "__main__":
    asyncio.run(main())
