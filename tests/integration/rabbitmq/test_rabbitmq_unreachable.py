"""Publishing when the broker is unreachable, hold-queue declarations, and malformed messages,
on the real broker (reached through a relay the test can cut; the shared broker itself is never
stopped).

Every publish path (enqueue, delayed, deferral, bulk, and a delivery's retry, deferral and dead
letter) fails within ``publish_timeout`` of its own start, however many others are waiting, and
says the broker is unreachable. A hold queue is declared once per connection, not once per
publish.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractConnection

from queuey import BackendError, Delivery, Envelope, Job, Producer, Queue, QueueConfig, QueueSet
from queuey.backends.rabbitmq import RabbitMqBackend, RabbitMqOptions
from tests.integration.rabbitmq.relay import Relay

pytestmark = pytest.mark.rabbitmq

TIMEOUT = 1.5  # publish_timeout, seconds
MARGIN = 0.75  # what a loaded machine may add to it


@dataclass
class Kit:
    queues: type[QueueSet]
    Task: type[Job[Any]]

    @property
    def config(self) -> QueueConfig:
        return self.Task.job_queue().config


def make_kit() -> Kit:
    prefix = f"u{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        work = Queue(prefetch=64)

    class Task(Job[Queues], queue=Queues.work, name=f"{prefix}.Task"):
        n: int = 0

    return Kit(Queues, Task)


@pytest.fixture
async def relay(amqp_url: str) -> AsyncIterator[Relay]:
    relay = await Relay(amqp_url).start()
    yield relay
    relay.refuse()


@pytest.fixture
async def through(
    relay: Relay, amqp_url: str
) -> AsyncIterator[Callable[..., Awaitable[RabbitMqBackend]]]:
    """``await through(**options)``: a backend connected through the relay; closed, and its
    queues deleted, afterwards."""
    opened: list[RabbitMqBackend] = []

    async def open_backend(**options: Any) -> RabbitMqBackend:
        backend = await RabbitMqBackend.connect(relay.url, RabbitMqOptions(**options))
        opened.append(backend)
        return backend

    yield open_backend
    relay.refuse()  # a closing handshake must not wait on a black hole
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        for backend in opened:
            await asyncio.wait_for(backend.close(), 30)
            for name in backend.declared_queue_names():
                await channel.queue_delete(name)
    finally:
        await connection.close()


async def timed(call: Awaitable[Any]) -> tuple[float, BaseException | None]:
    began = time.monotonic()
    try:
        await call
    except Exception as exc:
        return time.monotonic() - began, exc
    return time.monotonic() - began, None


@pytest.mark.parametrize("outage", ["refused", "blackholed"])
async def test_every_publish_fails_within_publish_timeout_when_the_broker_is_unreachable(
    through: Callable[..., Awaitable[RabbitMqBackend]], relay: Relay, outage: str
) -> None:
    backend = await through(
        publish_timeout=timedelta(seconds=TIMEOUT), connect_timeout=timedelta(seconds=1)
    )
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    await producer.enqueue_many([kit.Task(n=n) for n in range(12)])
    consumer = backend.consumer(kit.config)
    deliveries: list[Delivery] = []
    async with asyncio.timeout(10):
        while len(deliveries) < 12:
            delivery = await consumer.next()
            assert delivery is not None
            deliveries.append(delivery)
    relay.refuse() if outage == "refused" else relay.blackhole()

    task = kit.Task
    calls: dict[str, list[Awaitable[Any]]] = {
        "enqueue": [producer.enqueue(task()) for _ in range(4)],
        "enqueue_after one delay": [producer.enqueue_after(task(), "5s") for _ in range(4)],
        "enqueue_after delays": [producer.enqueue_after(task(), f"{6 + i}s") for i in range(4)],
        "defer": [producer.defer(task(), "3s") for _ in range(4)],
        "enqueue_many": [producer.enqueue_many([task(), task()]) for _ in range(2)],
        "enqueue_many delayed": [producer.enqueue_many([task()], delay="4s") for _ in range(2)],
        "retry": [
            d.retry(d.envelope.next_attempt(), timedelta(seconds=9), "boom") for d in deliveries[:4]
        ],
        "deferral": [
            d.defer(d.envelope.deferred(10), timedelta(seconds=11)) for d in deliveries[4:8]
        ],
        "dead letter": [d.dead_letter("gone") for d in deliveries[8:]],
    }
    kinds = [kind for kind, group in calls.items() for _ in group]
    results = await asyncio.gather(*(timed(call) for group in calls.values() for call in group))
    for kind, (elapsed, error) in zip(kinds, results, strict=True):
        assert isinstance(error, BackendError), (kind, error)
        assert elapsed < TIMEOUT + MARGIN, (kind, round(elapsed, 2), str(error))
        settle = kind in ("retry", "deferral", "dead letter")
        if not (settle and outage == "refused"):  # a dead channel's settle fails at once
            assert "unreachable" in str(error), (kind, str(error))
    await consumer.stop()


async def test_a_hold_queue_is_declared_once_per_connection(
    through: Callable[..., Awaitable[RabbitMqBackend]],
    relay: Relay,
    raw: AbstractConnection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    declared: list[str] = []
    original = aio_pika.Channel.declare_queue

    async def spy(self: aio_pika.Channel, name: str | None = None, **kwargs: Any) -> Any:
        if name and ".hold." in name:
            declared.append(name)
        return await original(self, name, **kwargs)

    monkeypatch.setattr(aio_pika.Channel, "declare_queue", spy)
    backend = await through()
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    hold = f"{kit.config.name}.hold.60000"

    for n in range(1000):
        await producer.enqueue_after(kit.Task(n=n), "60s")
    assert declared == [hold]
    await asyncio.gather(*(producer.enqueue_after(kit.Task(), "61s") for _ in range(200)))
    assert declared == [hold, f"{kit.config.name}.hold.61000"]

    relay.drop()  # the connection is replaced: what was declared on it is forgotten
    async with asyncio.timeout(10):
        while backend.reconnections == 0:
            await asyncio.sleep(0.05)
    await producer.enqueue_after(kit.Task(), "60s")
    await producer.enqueue_after(kit.Task(), "60s")
    assert declared[2:] == [hold]

    channel = await raw.channel()
    await channel.queue_delete(hold)  # behind the backend's back: declared again, not lost
    await producer.enqueue_after(kit.Task(), "60s")
    assert declared[3:] == [hold]
    assert backend._router.hold_declarations == len(declared)
    assert (await channel.declare_queue(hold, passive=True)).declaration_result.message_count == 1


async def test_a_hold_queue_is_declared_again_before_its_x_expires_can_run_out(
    through: Callable[..., Awaitable[RabbitMqBackend]],
) -> None:
    backend = await through()
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    await producer.enqueue_after(kit.Task(), "1s")  # x-expires 2s: trusted for 0.5s
    await producer.enqueue_after(kit.Task(), "1s")
    assert backend._router.hold_declarations == 1
    await asyncio.sleep(0.6)
    await producer.enqueue_after(kit.Task(), "1s")
    assert backend._router.hold_declarations == 2


async def test_a_malformed_message_is_dead_lettered_with_its_metadata_and_what_was_wrong(
    rabbitmq: RabbitMqBackend, raw: AbstractConnection
) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, rabbitmq)
    channel = await raw.channel()
    bodies = {
        "m-json": b"{not json",
        "m-field": b'{"job_id": "x", "queue": "q", "attempt": 1, "enqueued_at_ms": 0}',
        "m-range": Envelope.new("t", "q", {}).to_bytes().replace(b'"attempt":1', b'"attempt":0'),
    }
    for message_id, body in bodies.items():
        await channel.default_exchange.publish(
            aio_pika.Message(
                body,
                message_id=message_id,
                headers={"traceparent": "00-abc-def-01", "x-custom": 7},
                content_type="application/json",
                correlation_id=f"c-{message_id}",
                app_id="elsewhere",
                priority=3,
            ),
            kit.config.name,
        )
    await producer.enqueue(kit.Task(n=1))
    consumer = rabbitmq.consumer(kit.config)
    seen: list[tuple[str | None, str]] = []
    consumer.on_malformed = lambda message_id, reason: seen.append((message_id, reason))
    async with asyncio.timeout(10):
        delivery = await consumer.next()
    assert delivery is not None and delivery.envelope.payload == {"n": 1}
    await delivery.ack()
    await consumer.stop()

    reasons = {
        "m-json": "malformed envelope: Invalid JSON: key must be a string at line 1 column 2",
        "m-field": "malformed envelope: job_type: Field required",
        "m-range": "malformed envelope: attempt: Input should be greater than or equal to 1",
    }
    assert consumer.malformed == 3
    assert seen == list(reasons.items())
    dead_queue = await channel.get_queue(f"{kit.config.name}.dead")
    for message_id, reason in reasons.items():
        dead = await dead_queue.get(no_ack=True, timeout=5)
        assert dead is not None
        assert dead.body == bodies[message_id]
        assert dead.message_id == message_id
        assert dead.correlation_id == f"c-{message_id}"
        assert (dead.content_type, dead.app_id, dead.priority) == (
            "application/json",
            "elsewhere",
            3,
        )
        assert dead.headers["traceparent"] == "00-abc-def-01"
        assert dead.headers["x-custom"] == 7
        assert dead.headers["x-death-reason"] == reason
        assert dead.headers["x-original-queue"] == kit.config.name


async def test_a_batch_longer_to_confirm_than_publish_timeout_is_published_whole(
    through: Callable[..., Awaitable[RabbitMqBackend]], amqp_url: str
) -> None:
    """``publish_timeout`` bounds a broker that stops answering, not a batch's size: each
    window of the batch has its own deadline, so a batch whose confirms take longer in all
    than ``publish_timeout`` still lands, every message of it."""
    # One window (1,000 messages) must confirm within the timeout even on a loaded 2-core
    # machine, where a window has taken over 2 s; the batch as a whole takes several times
    # longer than the timeout (about 10 s of confirms here when idle).
    backend = await through(publish_timeout=timedelta(seconds=5))
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    jobs = 60_000
    await producer.enqueue_many([kit.Task(n=n) for n in range(jobs)])
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(kit.config.name, passive=True)
        assert queue.declaration_result.message_count == jobs
    finally:
        await connection.close()
