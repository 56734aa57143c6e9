"""MemoryBackend under virtual time (looptime): minutes of backoff pass in no wall time."""

from __future__ import annotations

import asyncio
import copy
import itertools
import time
from typing import Any

import pytest

from queuey import (
    Envelope,
    Job,
    JobContext,
    MemoryBackend,
    Producer,
    Queue,
    QueueSet,
    Retry,
    RetryPolicy,
    ShutDownError,
    Worker,
)
from queuey.testing import run_until_idle


class Slow(QueueSet, prefix="vt"):
    backoff = Queue(retry=RetryPolicy.exponential(5, base="1m", max="10m", jitter=False))


class Flaky(Job[Slow], queue=Slow.backoff):
    fail_until: int


@pytest.mark.looptime
async def test_minutes_of_backoff_pass_in_no_wall_time() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(Slow, backend)
    worker = Worker(Slow, backend)
    seen: list[tuple[int, float]] = []
    loop = asyncio.get_running_loop()

    @worker.handler(Flaky)
    async def handle(job: Flaky, ctx: JobContext) -> None:
        seen.append((ctx.attempt, loop.time()))
        if ctx.attempt <= job.fail_until:
            raise Retry("later")

    start_wall, start_loop = time.monotonic(), loop.time()
    await producer.enqueue(Flaky(fail_until=3))
    await run_until_idle(worker, backend, timeout=3600)
    waits = [round(b[1] - a[1]) for a, b in itertools.pairwise(seen)]
    assert [a for a, _ in seen] == [1, 2, 3, 4]
    assert waits == [60, 120, 240]
    assert loop.time() - start_loop >= 420
    assert time.monotonic() - start_wall < 1.0


def test_ordering_rule_keeps_each_priority_fifo() -> None:
    async def scenario() -> list[str]:
        backend = MemoryBackend()
        labels = ["normal-1", "urgent-1", "normal-2", "urgent-2", "middle", "normal-3"]
        for label, priority in zip(labels, [0, 10, 0, 10, 5, 0], strict=True):
            await backend.publish([Envelope.new("t", "q", label, priority=priority)])
        consumer = backend.consumer(backend.queue_config("q"))
        order = []
        for _ in labels:
            delivery = await consumer.next()
            assert delivery is not None
            order.append(delivery.envelope.payload)
            await delivery.ack()
        return order

    assert asyncio.run(scenario()) == [
        "urgent-1",
        "urgent-2",
        "middle",
        "normal-1",
        "normal-2",
        "normal-3",
    ]


async def test_copy_shares_state_and_close_refuses_publishes() -> None:
    backend = MemoryBackend()
    twin = copy.copy(backend)
    await backend.publish([Envelope.new("t", "q", {})])
    assert twin.pending("q") == 1
    assert twin.queue_names() == ["q"]
    await twin.close()
    assert backend.is_closed()
    with pytest.raises(ShutDownError):
        await backend.publish([Envelope.new("t", "q", {})])


async def test_async_with_closes_the_backend_and_a_closed_one_is_refused() -> None:
    async with MemoryBackend() as backend:  # as PostgresBackend and RabbitMqBackend
        assert isinstance(backend, MemoryBackend) and not backend.is_closed()
        await backend.publish([Envelope.new("t", "q", {})])
        assert backend.pending("q") == 1
    assert backend.is_closed()
    with pytest.raises(ShutDownError):
        async with backend:
            pass


@pytest.mark.looptime
async def test_deferred_and_delayed_counts() -> None:
    backend = MemoryBackend()
    await backend.defer(Envelope.new("t", "q", {}, priority=10), _seconds(30))
    await backend.publish([Envelope.new("t", "q", {})], _seconds(60))
    assert (backend.deferred("q"), backend.delayed("q"), backend.pending("q")) == (1, 1, 0)
    await asyncio.sleep(31)
    assert (backend.deferred("q"), backend.delayed("q"), backend.pending("q")) == (0, 1, 1)
    await asyncio.sleep(30)
    assert backend.pending("q") == 2 and not backend.is_idle()


def _seconds(value: float) -> Any:
    from datetime import timedelta

    return timedelta(seconds=value)
