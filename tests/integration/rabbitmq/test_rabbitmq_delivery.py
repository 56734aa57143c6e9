"""Delivery on a real broker: hold queues, malformed bodies, priorities, prefetch, headers,
dead letters, a blocking sync handler, and a consumer whose queue is deleted under it."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractConnection

from queuey import (
    BackendError,
    Envelope,
    Fatal,
    Job,
    JobContext,
    Producer,
    Queue,
    QueueConfig,
    QueueSet,
    RetryPolicy,
    Worker,
)
from queuey.backends.rabbitmq import RabbitMqBackend, RabbitMqOptions
from queuey.backends.rabbitmq._consumer import RabbitMqDelivery
from tests.helpers import run_until

Connect = Callable[..., Awaitable[Any]]
pytestmark = pytest.mark.rabbitmq


@dataclass
class Kit:
    queues: type[QueueSet]
    Task: type[Job[Any]]
    prefix: str

    @property
    def queue(self) -> str:
        return self.Task.job_queue().name


def make_kit(**options: Any) -> Kit:
    prefix = f"it{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        work = Queue(**options)

    class Task(Job[Queues], queue=Queues.work, name=f"{prefix}.Task"):
        label: str = ""

    return Kit(Queues, Task, prefix)


async def test_a_short_delay_is_not_blocked_behind_a_long_one(rabbitmq: RabbitMqBackend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, rabbitmq)
    worker = Worker(kit.queues, rabbitmq)
    started = time.monotonic()
    arrivals: list[tuple[str, float]] = []

    @worker.handler(kit.Task)
    async def handle(job: Any, ctx: JobContext) -> None:
        arrivals.append((job.label, time.monotonic() - started))

    await producer.enqueue_after(kit.Task(label="long"), "3s")
    await producer.enqueue_after(kit.Task(label="short"), "1s")
    await run_until(worker, lambda: len(arrivals) == 2)
    (first, first_at), (second, second_at) = arrivals
    assert (first, second) == ("short", "long")
    assert 0.9 <= first_at < 2.5
    assert second_at >= 2.9
    assert f"{kit.queue}.hold.1000" in rabbitmq.declared_queue_names()
    assert f"{kit.queue}.hold.3000" in rabbitmq.declared_queue_names()


async def test_a_malformed_body_goes_to_dead_and_never_reaches_a_handler(
    rabbitmq: RabbitMqBackend, raw: AbstractConnection
) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, rabbitmq)
    channel = await raw.channel()
    for body in (b"{not json", b'{"job_type": "missing fields"}'):
        await channel.default_exchange.publish(aio_pika.Message(body), kit.queue)
    await producer.enqueue(kit.Task(label="valid"))
    worker = Worker(kit.queues, rabbitmq)
    seen: list[str] = []

    @worker.handler(kit.Task)
    async def handle(job: Any, ctx: JobContext) -> None:
        seen.append(job.label)

    await run_until(worker, lambda: seen == ["valid"])
    async with asyncio.timeout(5):
        while len(dead := await rabbitmq.list_dead(kit.queue)) < 2:
            await asyncio.sleep(0.05)
    assert [(e.job_type, e.queue, e.payload, r) for e, r in dead] == [
        (
            "",
            kit.queue,
            "{not json",
            "malformed envelope: Invalid JSON: key must be a string at line 1 column 2",
        ),
        (
            "",
            kit.queue,
            '{"job_type": "missing fields"}',
            "malformed envelope: job_id: Field required",
        ),
    ]
    assert await rabbitmq.count_pending(kit.queue) == 0


async def test_a_higher_priority_overtakes_the_backlog(rabbitmq: RabbitMqBackend) -> None:
    kit = make_kit(prefetch=1, max_priority=10)
    await Producer.create(kit.queues, rabbitmq)
    plan = [("normal-1", 0), ("urgent-1", 10), ("normal-2", 0), ("urgent-2", 10)]
    plan += [("middle", 5), ("normal-3", 0)]
    await rabbitmq.publish(
        [
            Envelope.new(kit.Task.job_name(), kit.queue, {"label": label}, priority=priority)
            for label, priority in plan
        ]
    )
    worker = Worker(kit.queues, rabbitmq, concurrency=1)
    order: list[str] = []

    @worker.handler(kit.Task)
    async def handle(job: Any, ctx: JobContext) -> None:
        order.append(job.label)

    await run_until(worker, lambda: len(order) == 6)
    assert order == ["urgent-1", "urgent-2", "middle", "normal-1", "normal-2", "normal-3"]


async def test_a_republished_message_carries_our_attempt_and_no_x_death(
    rabbitmq: RabbitMqBackend, raw: AbstractConnection
) -> None:
    config = QueueConfig(f"it{uuid.uuid4().hex[:8]}.q")
    await rabbitmq.declare([config])
    await rabbitmq.publish([Envelope.new("t", config.name, {})], timedelta(milliseconds=100))
    consumer = rabbitmq.consumer(config)
    async with asyncio.timeout(5):
        delivery = await consumer.next()
    assert isinstance(delivery, RabbitMqDelivery)
    assert "x-death" in (
        delivery._message.properties().headers or {}
    )  # it came back through a hold queue
    await delivery.retry(delivery.envelope.next_attempt(), timedelta(seconds=1), "boom")
    channel = await raw.channel()
    held = await channel.get_queue(f"{config.name}.hold.1000", ensure=False)
    message = await held.get(no_ack=True)
    assert message.headers == {"x-attempt": 2, "x-deferrals": 0, "x-last-error": "boom"}
    assert Envelope.from_bytes(message.body).attempt == 2
    await consumer.stop()
    assert await consumer.next() is None


async def test_prefetch_bounds_unsettled_deliveries(rabbitmq: RabbitMqBackend) -> None:
    config = QueueConfig(f"it{uuid.uuid4().hex[:8]}.q", prefetch=2)
    await rabbitmq.declare([config])
    await rabbitmq.publish([Envelope.new("t", config.name, {"n": n}) for n in range(5)])
    consumer = rabbitmq.consumer(config)
    first, second = await consumer.next(), await consumer.next()
    assert first is not None and second is not None
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            await consumer.next()
    await first.ack()
    async with asyncio.timeout(5):
        third = await consumer.next()
    assert third is not None
    await consumer.stop()
    settled = [second, third]
    while (rest := await consumer.next()) is not None:
        settled.append(rest)
    for delivery in settled:
        await delivery.ack()
    assert [d.envelope.payload["n"] for d in [first, *settled]] == list(range(1 + len(settled)))
    assert await rabbitmq.count_pending(config.name) == 5 - 1 - len(settled)
    with pytest.raises(BackendError, match="already settled"):
        await first.ack()


async def test_list_dead_reads_without_consuming(rabbitmq: RabbitMqBackend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, rabbitmq)
    worker = Worker(kit.queues, rabbitmq, concurrency=1)

    @worker.handler(kit.Task)
    async def handle(job: Any, ctx: JobContext) -> None:
        raise Fatal(f"no {job.label}")

    await producer.enqueue_many([kit.Task(label=str(n)) for n in range(3)])
    await run_until(worker, lambda: worker.stats[kit.queue].dead == 3)
    first = await rabbitmq.list_dead(kit.queue)
    assert [r for _, r in first] == ["fatal error: no 0", "fatal error: no 1", "fatal error: no 2"]
    assert await rabbitmq.list_dead(kit.queue) == first
    assert await rabbitmq.list_dead(kit.queue, limit=2) == first[:2]
    assert await rabbitmq.count_pending(f"{kit.queue}.dead") == 3


async def test_a_sync_handler_blocking_past_the_heartbeat_keeps_the_connection(
    connect: Connect,
) -> None:
    backend: RabbitMqBackend = await connect(RabbitMqOptions(heartbeat=timedelta(seconds=1)))
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)
    done: list[str] = []

    @worker.handler(kit.Task)
    def handle(job: Any, ctx: JobContext) -> None:
        time.sleep(3.5)  # blocks its thread, never the event loop
        done.append(job.label)

    await producer.enqueue(kit.Task(label="slow"))
    await run_until(worker, lambda: worker.stats[kit.queue].succeeded == 1)
    assert done == ["slow"]
    assert backend.reconnections == 0
    assert worker.settle_failures == 0


async def test_a_consumer_cancelled_by_the_broker_is_re_established(
    rabbitmq: RabbitMqBackend, raw: AbstractConnection
) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, rabbitmq)
    worker = Worker(kit.queues, rabbitmq)
    seen: list[str] = []

    @worker.handler(kit.Task)
    async def handle(job: Any, ctx: JobContext) -> None:
        seen.append(job.label)

    task = asyncio.create_task(worker.run())
    try:
        await producer.enqueue(kit.Task(label="before"))
        async with asyncio.timeout(10):
            while seen != ["before"]:
                await asyncio.sleep(0.01)
            channel = await raw.channel()
            await channel.queue_delete(kit.queue)  # the broker cancels the consumer
            while True:  # the consumer declares the queue again
                try:
                    await producer.enqueue(kit.Task(label="after"))
                    break
                except BackendError:
                    await asyncio.sleep(0.05)
            while seen != ["before", "after"]:
                assert not task.done()
                await asyncio.sleep(0.01)
    finally:
        worker.shutdown()
        await task
    assert worker.settle_failures == 0


async def test_a_hold_too_long_for_rabbitmq_dead_letters_the_job(rabbitmq: RabbitMqBackend) -> None:
    config = QueueConfig(f"it{uuid.uuid4().hex[:8]}.q")
    await rabbitmq.declare([config])
    await rabbitmq.publish([Envelope.new("t", config.name, {})])
    consumer = rabbitmq.consumer(config)
    async with asyncio.timeout(5):
        delivery = await consumer.next()
    assert delivery is not None
    with pytest.raises(BackendError, match="dead-lettered instead"):
        await delivery.defer(delivery.envelope.deferred(10), timedelta(days=30))
    ((envelope, reason),) = await rabbitmq.list_dead(config.name)
    assert envelope.deferrals == 0
    assert reason.startswith(
        "cannot be scheduled: a delay of 30 days, 0:00:00 is longer than RabbitMQ"
    )
    await consumer.stop()
    assert await consumer.next() is None


async def test_a_retry_that_cannot_be_published_dead_letters_instead_of_spinning(
    rabbitmq: RabbitMqBackend, raw: AbstractConnection
) -> None:
    kit = make_kit(retry=RetryPolicy.fixed(3, "50ms"))
    producer = await Producer.create(kit.queues, rabbitmq)
    channel = await raw.channel()
    # A hold queue of the same name but other arguments: every declare of it is refused.
    hold = await channel.declare_queue(f"{kit.queue}.hold.1000", durable=True)
    worker = Worker(kit.queues, rabbitmq)
    runs: list[int] = []

    @worker.handler(kit.Task)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append(ctx.attempt)
        raise RuntimeError("try again")

    await producer.enqueue(kit.Task())
    await run_until(worker, lambda: worker.settle_failures == 1)
    async with asyncio.timeout(10):
        while not await rabbitmq.list_dead(kit.queue):
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    assert runs == [1], "the job must not be redelivered in a loop"
    await hold.delete(if_unused=False, if_empty=False)
