"""queuey on RabbitMQ: the queue ``bench.noop`` (and its dead-letter queue), persistent,
mandatory, confirmed publishes, with the library's defaults except the queue's ``prefetch``
(``basic.qos`` per consumer; 256 as on PostgreSQL) and its ``max_priority`` (0: a plain queue,
like Dramatiq's and raw aio-pika's, where queuey's default of 10 declares a priority queue;
``BENCH_QUEUEY_MAX_PRIORITY`` sets it)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import aio_pika

from bench.systems._env import AMQP_URL
from bench.systems._queuey import MAX_PRIORITY, PREFETCH, BenchQueues, QueueyBench
from queuey.backends.base import Backend
from queuey.backends.rabbitmq import RabbitMqBackend

__all__ = ["make"]


class QueueyRabbitmq(QueueyBench):
    """The ``Bench`` of queuey on RabbitMQ."""

    def __init__(self) -> None:
        self.settings: dict[str, Any] = {
            "driver": "aio-pika (publish), aiormq (consume)",
            "prefetch": PREFETCH,
            "max_priority": MAX_PRIORITY,
            "concurrency": "default (= prefetch)",
            "publisher_confirms": True,
            "delivery_mode": "persistent",
            "handler": "async def, no-op",
            "gc": "start-up heap frozen (gc.freeze), as queuey worker does",
        }

    def open_backend(self) -> AbstractAsyncContextManager[Backend]:
        return RabbitMqBackend(AMQP_URL)

    async def purge(self, backend: Backend) -> None:
        assert isinstance(backend, RabbitMqBackend)
        await backend.purge([BenchQueues.noop.name])

    async def _delete(self) -> None:
        async with await aio_pika.connect(AMQP_URL) as connection:
            channel = await connection.channel()
            for name in (BenchQueues.noop.name, f"{BenchQueues.noop.name}.dead"):
                await channel.queue_delete(name)

    async def setup(self) -> None:
        await self._delete()
        async with self.open_backend() as backend:
            await backend.declare([BenchQueues.noop.config])

    async def teardown(self) -> None:
        await self._delete()


def make() -> QueueyRabbitmq:
    """The system's ``Bench``."""
    return QueueyRabbitmq()
