"""Raw aio-pika on RabbitMQ, the client's ceiling: a durable queue ``bench_aiopika``, persistent
messages published with publisher confirms (one at a time, each confirm awaited; or all
pipelined, the confirms awaited together), consumed with prefetch 100 and one ack per message.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import aio_pika

from bench.systems import Tally
from bench.systems._env import AMQP_URL, SUFFIX

__all__ = ["make"]

QUEUE = f"bench_aiopika{SUFFIX}"
PREFETCH = 100


def _message() -> aio_pika.Message:
    return aio_pika.Message(
        json.dumps({"t": time.time()}).encode(),
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
    )


class AioPikaRabbitmq:
    """The ``Bench`` of raw aio-pika."""

    def __init__(self) -> None:
        self.settings: dict[str, Any] = {
            "version": aio_pika.__version__,
            "publisher_confirms": True,
            "delivery_mode": "persistent",
            "bulk": "all publishes pipelined, confirms gathered",
            "prefetch": PREFETCH,
            "ack": "one basic.ack per message",
        }

    async def setup(self) -> None:
        async with await aio_pika.connect(AMQP_URL) as connection:
            channel = await connection.channel()
            await channel.queue_delete(QUEUE)
            await channel.declare_queue(QUEUE, durable=True)

    async def teardown(self) -> None:
        async with await aio_pika.connect(AMQP_URL) as connection:
            channel = await connection.channel()
            await channel.queue_delete(QUEUE)

    async def clear(self) -> None:
        async with await aio_pika.connect(AMQP_URL) as connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(QUEUE, durable=True)
            await queue.purge()

    async def enqueue(self, payloads: int, bulk: bool, interval_s: float) -> float:
        async with await aio_pika.connect(AMQP_URL) as connection:
            channel = await connection.channel(publisher_confirms=True)
            exchange = channel.default_exchange
            started = time.perf_counter()
            if bulk:
                await asyncio.gather(
                    *(exchange.publish(_message(), routing_key=QUEUE) for _ in range(payloads))
                )
                return time.perf_counter() - started
            loop = asyncio.get_running_loop()
            start = loop.time()
            for i in range(payloads):
                if interval_s:
                    await asyncio.sleep(max(0.0, start + i * interval_s - loop.time()))
                await exchange.publish(_message(), routing_key=QUEUE)
            return time.perf_counter() - started

    async def work(self, tally: Tally, ready: Callable[[], None]) -> None:
        async with await aio_pika.connect(AMQP_URL) as connection:
            channel = await connection.channel()
            await channel.set_qos(prefetch_count=PREFETCH)
            queue = await channel.declare_queue(QUEUE, durable=True)

            async def handle(message: aio_pika.abc.AbstractIncomingMessage) -> None:
                tally.hit(float(json.loads(message.body)["t"]))
                await message.ack()

            ready()
            tag = await queue.consume(handle)
            await tally.done.wait()
            await queue.cancel(tag)


def make() -> AioPikaRabbitmq:
    """The system's ``Bench``."""
    return AioPikaRabbitmq()
