"""Dramatiq on RabbitMQ (pika), queue ``bench_dramatiq``.

Settings from its documentation for throughput: one worker process (two for ``drain_2p``, as
``dramatiq --processes 2`` forks them) with its default 8 worker threads and the default
prefetch (2 per thread), the default middleware, and the broker's default
``confirm_delivery=False`` (publishes are not confirmed; queuey's are). Dramatiq has no
bulk enqueue: ``enqueue_bulk`` is ``send`` in a loop. Its calls block, so they run in a thread.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

import dramatiq
import pika
from dramatiq.brokers.rabbitmq import RabbitmqBroker

from bench.systems import Tally
from bench.systems._env import AMQP_URL, SUFFIX

__all__ = ["make"]

QUEUE = f"bench_dramatiq{SUFFIX}"
THREADS = int(os.environ.get("BENCH_DRAMATIQ_THREADS", "8"))


class DramatiqRabbitmq:
    """The ``Bench`` of Dramatiq."""

    def __init__(self) -> None:
        self.settings: dict[str, Any] = {
            "version": dramatiq.__version__,
            "driver": "pika (RabbitmqBroker)",
            "worker_threads": THREADS,
            "prefetch": 2 * THREADS,
            "confirm_delivery": False,
            "bulk": "no bulk API: send() in a loop",
            "handler": "def, no-op (worker thread)",
        }
        self.tally: Tally | None = None
        self.broker = RabbitmqBroker(url=AMQP_URL)
        dramatiq.set_broker(self.broker)

        @dramatiq.actor(queue_name=QUEUE, actor_name="noop", max_retries=0)
        def noop(t: float) -> None:
            if self.tally is not None:
                self.tally.hit(t)

        self.noop = noop

    def _delete(self) -> None:
        connection = pika.BlockingConnection(pika.URLParameters(AMQP_URL))
        channel = connection.channel()
        for name in (QUEUE, f"{QUEUE}.DQ", f"{QUEUE}.XQ"):
            channel.queue_delete(name)
        connection.close()

    async def setup(self) -> None:
        await asyncio.to_thread(self._delete)
        await asyncio.to_thread(self.broker.declare_queue, QUEUE)
        self.broker.close()

    async def teardown(self) -> None:
        await asyncio.to_thread(self._delete)

    async def clear(self) -> None:
        await asyncio.to_thread(self.broker.flush, QUEUE)
        self.broker.close()

    def _send(self, payloads: int, interval_s: float) -> float:
        del self.broker.connection  # a fresh connection for this thread, made before timing
        self.broker.channel.basic_qos(prefetch_count=1)  # a round trip: the channel is open
        started = start = time.monotonic()
        for i in range(payloads):
            if interval_s:
                time.sleep(max(0.0, start + i * interval_s - time.monotonic()))
            self.noop.send(time.time())
        elapsed = time.monotonic() - started
        self.broker.close()
        return elapsed

    async def enqueue(self, payloads: int, bulk: bool, interval_s: float) -> float:
        return await asyncio.to_thread(self._send, payloads, interval_s)

    async def work(self, tally: Tally, ready: Callable[[], None]) -> None:
        self.tally = tally
        worker = dramatiq.Worker(self.broker, worker_threads=THREADS, worker_timeout=100)
        ready()
        worker.start()
        await tally.done.wait()
        await asyncio.to_thread(worker.join)
        await asyncio.to_thread(worker.stop)
        self.broker.close()


def make() -> DramatiqRabbitmq:
    """The system's ``Bench``."""
    return DramatiqRabbitmq()
