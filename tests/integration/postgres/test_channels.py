"""NOTIFY channels: a backend LISTENs only on the channel its own publishes notify, so apps
sharing one database and one schema never wake each other (seed ``000``: "two apps sharing one
database don't wake each other for nothing").

Every consumer below consumes a queue of the same name (a topic of the default-prefix app, the
same topic of an app with its own prefix, and a typed-job queue), so a notification received on
another app's channel would wake it and be counted.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest

from queuey.backends.postgres import PostgresBackend
from queuey.backends.postgres._consumer import PgConsumer
from queuey.cli._app import connect_backend
from queuey.envelope import Envelope
from queuey.queues import QueueConfig
from queuey.topics import QueuesConfig
from queuey.topics.publisher import TopicPublisher
from queuey.topics.subscriber import topic_queue
from tests.conftest import unique

pytestmark = pytest.mark.postgres

NEVER = 3600  # seconds: no poll tick wakes anyone during the test


class Wakes:
    """Counts each consumer's wake-ups (``poke``), by name."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def watch(self, name: str, consumer: PgConsumer) -> None:
        poke = consumer.poke

        def counted() -> None:
            self.counts[name] += 1
            poke()

        consumer.poke = counted  # type: ignore[method-assign]

    async def settle(self, expected: dict[str, int], timeout: float = 10) -> None:
        """Wait until the counts reach ``expected``, then a little longer for strays."""
        async with asyncio.timeout(timeout):
            while any(self.counts[name] < count for name, count in expected.items()):
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)


async def app_backend(
    config: QueuesConfig, url: str, schema: str, stack: AsyncExitStack
) -> PostgresBackend:
    backend = await connect_backend(config, url, schema=schema)
    stack.push_async_callback(backend.close)
    assert isinstance(backend, PostgresBackend)
    return backend


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def test_apps_sharing_a_schema_are_woken_only_by_their_own_publishes(
    database_url: str, pg_schema: str, stack: AsyncExitStack
) -> None:
    topic = unique("iso").replace("_", ".")
    default_app = QueuesConfig(subscribe={topic: "on_default"}, poll_secs=NEVER)
    own_app = QueuesConfig(prefix=unique("shop"), subscribe={topic: "on_shop"}, poll_secs=NEVER)
    typed = PostgresBackend(database_url, schema=pg_schema, poll_interval=NEVER)
    await typed.open()
    stack.push_async_callback(typed.close)
    backends = {
        "default": await app_backend(default_app, database_url, pg_schema, stack),
        "shop": await app_backend(own_app, database_url, pg_schema, stack),
        "typed": typed,
    }
    queues = {
        "default": topic_queue(topic, default_app),
        "shop": topic_queue(topic, own_app),
        "typed": QueueConfig(topic),
    }
    wakes = Wakes()
    consumers = {}
    for name, backend in backends.items():
        consumers[name] = backend.consumer(queues[name])
        stack.push_async_callback(consumers[name].stop)
        wakes.watch(name, consumers[name])
    for backend in backends.values():
        assert backend.listener is not None
        await asyncio.wait_for(backend.listener.connected.wait(), 10)
    await asyncio.sleep(0.2)
    wakes.counts.clear()  # the wake-ups of connecting

    await TopicPublisher(default_app, backends["default"]).publish(topic, {"n": 1})
    for n in range(2):
        await TopicPublisher(own_app, backends["shop"]).publish(topic, {"n": n})
    for n in range(3):
        await typed.publish([Envelope.new("iso.Job", topic, {"n": n})])
    expected = {"default": 1, "shop": 2, "typed": 3}
    await wakes.settle(expected)

    assert dict(wakes.counts) == expected
    assert backends["default"].listener is not None
    # and the schema's cancellations and ended jobs (for awaited results), which wake nobody
    cancel, ended = f"{pg_schema}_cancel", f"{pg_schema}_results"
    assert backends["default"].listener.channels == ("queuey_queue", cancel, ended)
    assert backends["shop"].listener is not None
    assert backends["shop"].listener.channels == (own_app.channel(), cancel, ended)
    assert typed.listener is not None
    assert typed.listener.channels == (f"{pg_schema}_jobs", cancel, ended)
    for name, count in expected.items():  # each publish reached the consumer it woke
        deliveries = [await consumers[name].next() for _ in range(count)]
        assert all(d is not None and d.envelope.queue == topic for d in deliveries)
        assert {d.envelope.kind for d in deliveries if d} == {queues[name].kind}
        for delivery in deliveries:
            assert delivery is not None
            await delivery.ack()


def test_typed_jobs_never_share_a_channel_with_a_default_prefix_topic_app() -> None:
    """With the default schema and the default prefix, typed-job publishes must not wake the
    topic app (seed 000: apps sharing a database don't wake each other for nothing)."""
    from queuey.backends.postgres import PostgresBackend
    from queuey.topics.config import QueuesConfig

    typed = PostgresBackend("postgresql://localhost/x")
    assert typed.channel == "queuey_jobs"
    assert typed.channel != QueuesConfig().channel()
