"""The RabbitMQ backend's topology and refusals, read back from a real broker."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractConnection

from queuey import (
    BackendError,
    ConfigError,
    Envelope,
    Job,
    Producer,
    Queue,
    QueueConfig,
    QueueSet,
    RetryPolicy,
    ShutDownError,
    UnknownQueueError,
)
from queuey.backends.rabbitmq import RabbitMqBackend

pytestmark = pytest.mark.rabbitmq

ListQueues = Callable[[str], Awaitable[dict[str, dict[str, Any]]]]


def _prefix() -> str:
    return f"it{uuid.uuid4().hex[:8]}"


async def test_declared_topology_reads_back_from_the_broker(
    rabbitmq: RabbitMqBackend, list_queues: ListQueues
) -> None:
    prefix = _prefix()

    class Queues(QueueSet, prefix=prefix):
        emails = Queue()
        plain = Queue(max_priority=0, message_ttl="1500ms", durable=False)

    class Email(Job[Queues], queue=Queues.emails, name=f"{prefix}.Email"):
        to: str

    producer = await Producer.create(Queues, rabbitmq)
    await producer.defer(Email(to="a@b.c"), "2.5s")
    # rounded up to 4 s; its x-expires (8 s) outlasts rabbitmqctl's few seconds on a busy box
    await producer.enqueue_after(Email(to="d@e.f"), "3400ms")

    queues = await list_queues(prefix)
    emails, plain = f"{prefix}.emails", f"{prefix}.plain"
    assert queues == {
        emails: {
            "durable": True,
            "arguments": {
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": f"{emails}.dead",
                "x-max-priority": 10,
            },
        },
        f"{emails}.dead": {"durable": True, "arguments": {}},
        f"{emails}.hold.3000": {
            "durable": True,
            "arguments": {
                "x-message-ttl": 3000,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": emails,
                "x-expires": 6000,
            },
        },
        f"{emails}.hold.4000": {
            "durable": True,
            "arguments": {
                "x-message-ttl": 4000,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": emails,
                "x-expires": 8000,
            },
        },
        plain: {
            "durable": False,
            "arguments": {
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": f"{plain}.dead",
                "x-message-ttl": 1500,
            },
        },
        f"{plain}.dead": {"durable": True, "arguments": {}},
    }
    assert rabbitmq.declared_queue_names() == sorted(queues)


async def test_declare_is_idempotent(rabbitmq: RabbitMqBackend) -> None:
    config = QueueConfig(f"{_prefix()}.q")
    await rabbitmq.declare([config])
    await rabbitmq.declare([config])
    assert await rabbitmq.count_pending(config.name) == 0


async def test_a_topic_never_shares_a_queue_with_a_typed_queue_of_its_name(
    rabbitmq: RabbitMqBackend, list_queues: ListQueues
) -> None:
    name = f"{_prefix()}.paid"
    await rabbitmq.declare([QueueConfig(name), QueueConfig(name, kind="topic", max_priority=0)])
    await rabbitmq.publish([Envelope.new("notify_ops", name, {}, kind="topic")])
    assert await rabbitmq.count_pending(name, "topic") == 1
    assert await rabbitmq.count_pending(name) == 0
    assert f"queuey-topic.{name}" in await list_queues("queuey-topic." + name)


async def test_adding_max_priority_to_an_existing_queue_says_what_to_do(
    rabbitmq: RabbitMqBackend,
) -> None:
    name = f"{_prefix()}.legacy"
    await rabbitmq.declare([QueueConfig(name, max_priority=0)])
    with pytest.raises(BackendError) as caught:
        await rabbitmq.declare([QueueConfig(name, max_priority=10)])
    message = str(caught.value)
    assert "x-max-priority" in message
    assert "drain and delete the queue" in message
    assert "max_priority=0" in message
    # the refusal closed a channel, not the connection: the backend still works
    await rabbitmq.publish([Envelope.new("t", name, {})])
    assert await rabbitmq.count_pending(name) == 1


async def test_an_unroutable_publish_is_an_error(rabbitmq: RabbitMqBackend) -> None:
    with pytest.raises(BackendError, match="unroutable"):
        await rabbitmq.publish([Envelope.new("t", f"{_prefix()}.nowhere", {})])


async def test_an_unroutable_message_in_a_batch_names_its_queue_and_the_rest_arrive(
    rabbitmq: RabbitMqBackend,
) -> None:
    """A batch goes out pipelined, one deadline for the window; the one message whose queue
    is missing fails with an error naming that queue, and the others are published."""
    name = f"{_prefix()}.q"
    await rabbitmq.declare([QueueConfig(name)])
    batch = [Envelope.new("t", name, {"n": n}) for n in range(5)]
    batch.insert(2, Envelope.new("t", f"{name}.nowhere", {}))
    with pytest.raises(BackendError, match=rf"publishing to '{name}.nowhere'.*unroutable"):
        await rabbitmq.publish(batch)
    assert await rabbitmq.count_pending(name) == 5


async def test_delays_need_a_declared_queue_and_fit_the_ttl_limit(
    rabbitmq: RabbitMqBackend,
) -> None:
    name = f"{_prefix()}.q"
    envelope = Envelope.new("t", name, {})
    with pytest.raises(UnknownQueueError):
        await rabbitmq.defer(envelope, timedelta(seconds=1))
    with pytest.raises(UnknownQueueError):
        await rabbitmq.publish([envelope], timedelta(seconds=1))
    await rabbitmq.declare([QueueConfig(name)])
    with pytest.raises(ConfigError, match="longer than RabbitMQ can hold"):
        await rabbitmq.publish([envelope], timedelta(days=30))
    await rabbitmq.publish([envelope], timedelta(0))  # zero: straight to the queue
    assert await rabbitmq.count_pending(name) == 1
    assert await rabbitmq.count_pending(f"{name}.missing") == 0


async def test_durations_rabbitmq_cannot_hold_are_refused_before_anything_is_declared(
    rabbitmq: RabbitMqBackend, raw: AbstractConnection
) -> None:
    name = f"{_prefix()}.q"
    too_long = [
        QueueConfig(f"{name}.ttl", message_ttl=timedelta(days=50)),
        QueueConfig(f"{name}.retry", retry=RetryPolicy.fixed(2, "25d")),
    ]
    for config in too_long:
        with pytest.raises(ConfigError, match=f"^queue '{config.name}': "):
            await rabbitmq.declare([QueueConfig(name), config])
    assert rabbitmq.declared_queue_names() == []
    channel = await raw.channel()
    with pytest.raises(aio_pika.exceptions.ChannelClosed):
        await channel.declare_queue(name, passive=True)  # nothing was declared
    longest = QueueConfig(
        f"{name}.longest",
        message_ttl=timedelta(milliseconds=2**32 - 1),
        retry=RetryPolicy.fixed(2, rabbitmq.max_delay),
    )
    await rabbitmq.declare([longest])


async def test_purge_empties_queue_dead_and_holds(
    rabbitmq: RabbitMqBackend, raw: AbstractConnection
) -> None:
    name = f"{_prefix()}.q"
    await rabbitmq.declare([QueueConfig(name)])
    await rabbitmq.publish([Envelope.new("t", name, {}) for _ in range(3)])
    await rabbitmq.publish([Envelope.new("t", name, {})], timedelta(seconds=5))
    channel = await raw.channel()
    await channel.default_exchange.publish(aio_pika.Message(b"x"), f"{name}.dead")
    assert await rabbitmq.purge([name, f"{name}.never-declared"]) == 5
    assert await rabbitmq.count_pending(name) == 0
    assert await rabbitmq.list_dead(name) == []


async def test_connecting_with_a_bad_password_never_shows_it(amqp_url: str) -> None:
    url = amqp_url.replace("guest:guest@", "guest:Sup3rSecret@")
    with pytest.raises(BackendError) as caught:
        await RabbitMqBackend.connect(url)
    assert "Sup3rSecret" not in str(caught.value)
    assert "***" in str(caught.value)


async def test_close_is_idempotent_and_final(amqp_url: str) -> None:
    backend = await RabbitMqBackend.connect(amqp_url)
    await backend.close()
    await backend.close()
    assert backend.is_closed()
    with pytest.raises(ShutDownError):
        await backend.publish([Envelope.new("t", "q", {})])
    with pytest.raises(ShutDownError):
        await backend.open()
    unopened = RabbitMqBackend(amqp_url)  # no I/O until connect/open
    await unopened.close()
    async with await RabbitMqBackend.connect(amqp_url) as scoped:
        assert not scoped.is_closed()
    assert scoped.is_closed()
