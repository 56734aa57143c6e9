"""A broker outage under a worker is one WARNING line when it starts and one INFO line when it
ends: aiormq's ERROR per failed connect, the link's failed attempts and each consumer's
interruption are DEBUG records. A TCP proxy between the worker and RabbitMQ is cut for a few
seconds, as in a restart, without touching the shared broker."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from aio_pika.abc import AbstractConnection

from queuey import Job, JobContext, Queue, QueueSet, Worker
from queuey.backends.rabbitmq import RabbitMqBackend, RabbitMqOptions
from tests.tcp_proxy import Proxy, through

pytestmark = pytest.mark.rabbitmq


class BrokerOutage(QueueSet, prefix="rmq-outage"):
    first = Queue(prefetch=2, durable=False)
    second = Queue(prefetch=2, durable=False)


class Nothing(Job[BrokerOutage], queue=BrokerOutage.first, name="rmq-outage.Nothing"):
    pass


async def test_a_broker_outage_under_a_worker_is_one_line_at_each_end(
    amqp_url: str, raw: AbstractConnection, caplog: pytest.LogCaptureFixture
) -> None:
    parts = urlsplit(amqp_url)
    proxy = Proxy(parts.hostname or "127.0.0.1", parts.port or 5672)
    await proxy.start()
    options = RabbitMqOptions(reconnect_max=timedelta(seconds=1))
    async with RabbitMqBackend(through(amqp_url, proxy.port), options) as backend:
        worker = Worker(BrokerOutage, backend)

        @worker.handler(Nothing)
        async def nothing(job: Nothing, ctx: JobContext) -> None:
            return None

        task = asyncio.create_task(worker.run())
        try:
            await asyncio.sleep(1.0)  # both consumers consuming
            caplog.set_level(logging.INFO)
            await proxy.cut()
            await asyncio.sleep(3.0)  # attempts every 0.2, 0.4, 0.8, 1 s, refused
            await proxy.start()
            async with asyncio.timeout(30):
                while not any(r.getMessage().startswith("reconnected") for r in caplog.records):
                    await asyncio.sleep(0.1)
            await asyncio.sleep(1.5)  # the consumers come back; anything they log is counted
        finally:
            worker.shutdown()
            await task
    channel = await raw.channel()
    for queue in BrokerOutage.all():
        for name in (queue.name, f"{queue.name}.dead"):
            await channel.queue_delete(name)
    lines = [(r.levelname, r.name, r.getMessage()) for r in caplog.records]
    warnings = [line for line in lines if line[0] in ("WARNING", "ERROR", "CRITICAL")]
    assert len(warnings) == 1, lines
    assert warnings[0][1] == "queuey.rabbitmq" and "lost; reconnecting" in warnings[0][2]
    back = [line for line in lines if line[2].startswith("reconnected")]
    assert len(back) == 1 and back[0][0] == "INFO", lines
