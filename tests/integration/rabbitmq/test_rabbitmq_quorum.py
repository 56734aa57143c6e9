"""Quorum queues (``RabbitMqOptions(queue_type="quorum")``) on the local broker: every queue
declared is a quorum queue dead-lettering at least once, what 3.10's quorum queues cannot do is
refused, a queue of the other type is named with the way out, the delivery limit follows
``max_redeliveries`` (and a handed-back job does not spend it), and a worker retries, defers
and dead-letters through them."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aio_pika
import pytest

from queuey import (
    BackendError,
    ConfigError,
    Defer,
    Fatal,
    Job,
    JobContext,
    Producer,
    Queue,
    QueueConfig,
    QueueSet,
    Retry,
    RetryPolicy,
    Worker,
)
from queuey.backends.rabbitmq import RabbitMqOptions
from queuey.backends.rabbitmq._wire import DELIVERY_LIMIT_REASON
from tests.helpers import run_until

pytestmark = pytest.mark.rabbitmq

Connect = Callable[..., Awaitable[Any]]
Ctl = Callable[..., Awaitable[str]]
QUORUM = RabbitMqOptions(queue_type="quorum")
AT_LEAST_ONCE = {
    "x-queue-type": "quorum",
    "x-dead-letter-strategy": "at-least-once",
    "x-overflow": "reject-publish",
}


@dataclass
class Kit:
    queues: type[QueueSet]
    Task: type[Job[Any]]
    prefix: str

    @property
    def queue(self) -> str:
        return self.Task.job_queue().name


def make_kit(**options: Any) -> Kit:
    prefix = f"qq{uuid.uuid4().hex[:8]}"
    options.setdefault("max_priority", 0)

    class Queues(QueueSet, prefix=prefix):
        work = Queue(**options)

    class Task(Job[Queues], queue=Queues.work, name=f"{prefix}.Task"):
        label: str = ""

    return Kit(Queues, Task, prefix)


async def read_queues(ctl: Ctl, prefix: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """``{name: (type, arguments)}`` of the broker's queues whose name starts with ``prefix``."""
    out = await ctl("list_queues", "name", "type", "arguments", "--formatter", "json", "-q")
    return {
        row["name"]: (row["type"], {key: value for key, _type, value in row["arguments"]})
        for row in json.loads(out)
        if row["name"].startswith(prefix)
    }


async def test_every_declared_queue_is_a_quorum_queue_dead_lettering_at_least_once(
    connect: Connect, ctl: Ctl
) -> None:
    kit = make_kit(message_ttl="1h")
    backend = await connect(RabbitMqOptions(queue_type="quorum", max_redeliveries=3))
    producer = await Producer.create(kit.queues, backend)
    await producer.enqueue_after(kit.Task(label="later"), "30s")

    queues = await read_queues(ctl, kit.prefix)
    main, dead, hold = kit.queue, f"{kit.queue}.dead", f"{kit.queue}.hold.30000"
    assert queues == {
        main: (
            "quorum",
            {
                **AT_LEAST_ONCE,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": dead,
                "x-delivery-limit": 2,  # a job is delivered at most max_redeliveries times
                "x-message-ttl": 3_600_000,
            },
        ),
        dead: ("quorum", {"x-queue-type": "quorum"}),
        hold: (
            "quorum",
            {
                **AT_LEAST_ONCE,
                "x-message-ttl": 30000,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": main,
                "x-expires": 120000,  # twice the TTL and a minute: see QUORUM_HOLD_GRACE_MS
            },
        ),
    }


async def test_priorities_and_transient_queues_are_refused_naming_the_queue(
    connect: Connect, ctl: Ctl
) -> None:
    backend = await connect(QUORUM)
    prioritised = make_kit(max_priority=10)
    with pytest.raises(ConfigError) as caught:
        await backend.declare([prioritised.Task.job_queue().config])
    assert str(caught.value) == (
        f"queue {prioritised.queue!r}: max_priority=10, but quorum queues of RabbitMQ 3.10 have "
        "no priorities (queuey does not emulate them: that would take one replicated queue per "
        'level); declare it with Queue(max_priority=0), or keep queue_type="classic"'
    )
    with pytest.raises(ConfigError, match="no priorities"):
        backend.consumer(prioritised.Task.job_queue().config)
    with pytest.raises(ConfigError, match="no priorities"):
        await Producer.create(make_kit(max_priority=1).queues, backend)
    transient = make_kit(durable=False)
    with pytest.raises(ConfigError, match=r"durable=False, but a quorum queue is always durable"):
        await backend.declare([transient.Task.job_queue().config])
    assert await read_queues(ctl, prioritised.prefix) == {}
    assert await read_queues(ctl, transient.prefix) == {}


async def test_a_classic_queue_is_not_turned_into_a_quorum_queue(connect: Connect) -> None:
    for classic_options in ({"max_priority": 10}, {"max_priority": 0}):
        kit = make_kit(**classic_options)
        classic = await connect()
        await classic.declare([kit.Task.job_queue().config])
        quorum = await connect(QUORUM)
        with pytest.raises(BackendError) as caught:
            await quorum.declare([QueueConfig(name=kit.queue, max_priority=0)])
        message = str(caught.value)
        # the .dead queue is declared first: it is the one named
        assert f"queue '{kit.queue}.dead' exists as a classic queue, not a quorum queue" in message
        assert "RabbitMQ cannot change a queue's type" in message
        assert "switching queue types" in message


async def test_a_quorum_queue_is_not_declared_again_as_a_classic_one(connect: Connect) -> None:
    kit = make_kit()
    quorum = await connect(QUORUM)
    await quorum.declare([kit.Task.job_queue().config])
    classic = await connect()
    with pytest.raises(BackendError) as caught:
        await classic.declare([kit.Task.job_queue().config])
    assert f"queue '{kit.queue}.dead' exists as a quorum queue, not a classic queue" in str(
        caught.value
    )


async def test_a_job_lost_max_redeliveries_times_is_dead_lettered_by_the_broker(
    connect: Connect, amqp_url: str
) -> None:
    kit = make_kit()
    backend = await connect(RabbitMqOptions(queue_type="quorum", max_redeliveries=3))
    producer = await Producer.create(kit.queues, backend)
    await producer.enqueue(kit.Task(label="crashes"))
    connection = await aio_pika.connect(amqp_url)
    deliveries = 0
    try:
        for _ in range(5):  # a worker that dies with the job: its channel closes, unsettled
            channel = await connection.channel()
            queue = await channel.get_queue(kit.queue, ensure=False)
            message = await queue.get(no_ack=False, fail=False, timeout=5)
            if message is None:
                break
            deliveries += 1
            await channel.close()
    finally:
        await connection.close()
    assert deliveries == 3
    async with asyncio.timeout(10):
        while not (dead := await backend.list_dead(kit.queue)):
            await asyncio.sleep(0.05)
    assert [(envelope.payload, reason) for envelope, reason in dead] == [
        ({"label": "crashes"}, DELIVERY_LIMIT_REASON)
    ]
    assert await backend.count_pending(kit.queue) == 0


async def test_a_job_handed_back_does_not_spend_its_delivery_limit(connect: Connect) -> None:
    kit = make_kit()
    # max_redeliveries=1: the broker dead-letters a job at its first return (x-delivery-limit 0)
    backend = await connect(RabbitMqOptions(queue_type="quorum", max_redeliveries=1))
    producer = await Producer.create(kit.queues, backend)
    await producer.enqueue(kit.Task(label="handed back"))
    for _ in range(3):  # a graceful shutdown, or a pause, hands it back each time
        consumer = backend.consumer(kit.Task.job_queue().config)
        async with asyncio.timeout(10):
            delivery = await consumer.next()
        assert delivery is not None
        await consumer.stop()
        await delivery.release()
    consumer = backend.consumer(kit.Task.job_queue().config)
    async with asyncio.timeout(10):
        delivery = await consumer.next()
    assert delivery is not None and delivery.envelope.payload == {"label": "handed back"}
    await delivery.ack()
    await consumer.stop()
    assert await backend.list_dead(kit.queue) == []


async def test_a_worker_retries_defers_and_dead_letters_through_quorum_queues(
    connect: Connect,
) -> None:
    kit = make_kit(retry=RetryPolicy.fixed(3, "1s"))
    backend = await connect(QUORUM)
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)
    runs: list[tuple[str, int]] = []

    @worker.handler(kit.Task)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append((job.label, ctx.attempt))
        if job.label == "fatal":
            raise Fatal("not deliverable")
        if job.label == "flaky" and ctx.attempt == 1:
            raise Retry("once more")
        if job.label == "deferred" and ctx.deferrals == 0:
            raise Defer("1s")

    labels = ("ok", "flaky", "fatal", "deferred")
    await producer.enqueue_many([kit.Task(label=label) for label in labels])
    await run_until(worker, lambda: len(runs) == 6)
    assert sorted(runs) == [
        ("deferred", 1),
        ("deferred", 1),
        ("fatal", 1),
        ("flaky", 1),
        ("flaky", 2),
        ("ok", 1),
    ]
    dead = await backend.list_dead(kit.queue)
    assert [(envelope.payload, reason) for envelope, reason in dead] == [
        ({"label": "fatal"}, "fatal error: not deliverable")
    ]
    assert f"{kit.queue}.hold.1000" in backend.declared_queue_names()
