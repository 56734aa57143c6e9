"""Flow limits on every backend: a concurrency cap and a rate limit per key hold on memory and
PostgreSQL (a job held back is not an attempt), and RabbitMQ refuses limits with a
``ConfigError`` naming what it cannot enforce."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from typing import Any

import pytest

from queuey import (
    Concurrency,
    ConfigError,
    Job,
    JobContext,
    Producer,
    Queue,
    QueueSet,
    RateLimit,
    Worker,
)
from queuey.backends.base import Backend
from tests.helpers import run_until


def make_set() -> tuple[type[QueueSet], type[Job[Any]], type[Job[Any]]]:
    prefix = f"f{uuid.uuid4().hex[:8]}"

    class Limited(QueueSet, prefix=prefix):
        capped = Queue(prefetch=8, limits=[Concurrency(2, by="tenant")])
        rated = Queue(prefetch=8)

    class Capped(Job[Limited], queue=Limited.capped, name=f"{prefix}.Capped"):
        tenant: str
        n: int

    class Rated(Job[Limited], queue=Limited.rated, name=f"{prefix}.Rated",
                limits=[RateLimit(3, per="1s", by="tenant")]):  # fmt: skip
        tenant: str
        n: int

    return Limited, Capped, Rated


def refuses_limits(backend: Backend) -> bool:
    return type(backend).__name__ == "RabbitMqBackend"


async def test_a_concurrency_cap_per_key_holds(backend: Backend) -> None:
    queues, capped, _ = make_set()
    if refuses_limits(backend):
        with pytest.raises(ConfigError, match=r"flow limits .*concurrency 2 by tenant"):
            backend.consumer(queues.all()[0].config)
        return

    worker = Worker(queues, backend, queues=[queues.all()[0]], concurrency=8)
    running: dict[str, int] = defaultdict(int)
    peaks: dict[str, int] = defaultdict(int)
    attempts: list[int] = []

    @worker.handler(capped)
    async def handle(job: Any, ctx: JobContext) -> None:
        running[job.tenant] += 1
        peaks[job.tenant] = max(peaks[job.tenant], running[job.tenant])
        await asyncio.sleep(0.05)
        running[job.tenant] -= 1
        attempts.append(ctx.attempt)

    producer = await Producer.create(queues, backend)
    await producer.enqueue_many([capped(tenant=t, n=n) for n in range(6) for t in "ab"])
    await run_until(worker, lambda: len(attempts) == 12, timeout=30)
    assert dict(peaks) == {"a": 2, "b": 2}
    assert set(attempts) == {1}


async def test_a_rate_limit_per_key_holds(backend: Backend) -> None:
    queues, _, rated = make_set()
    if refuses_limits(backend):
        return  # a job type's limits reach the backend with its worker: see the cap case

    worker = Worker(queues, backend, queues=[queues.all()[1]], concurrency=8)
    starts: dict[str, list[float]] = defaultdict(list)

    @worker.handler(rated)
    async def handle(job: Any, ctx: JobContext) -> None:
        starts[job.tenant].append(asyncio.get_running_loop().time())

    producer = await Producer.create(queues, backend)
    await producer.enqueue_many([rated(tenant=t, n=n) for n in range(6) for t in "ab"])
    await run_until(worker, lambda: sum(map(len, starts.values())) == 12, timeout=30)
    for tenant, times in starts.items():
        for i, first in enumerate(times):  # never 4 of a key within a second (0.2 s margin)
            assert sum(1 for t in times[i:] if t - first < 0.8) <= 3, (tenant, times)
        assert 0.9 <= times[-1] - times[0] < 5, (tenant, times)


async def test_a_burst_starts_at_once_then_the_pace_holds(backend: Backend) -> None:
    """``RateLimit(2, per="1s", burst=2)``: an idle key starts 3 at once, then one each 0.5 s;
    no second holds more than 4."""
    prefix = f"f{uuid.uuid4().hex[:8]}"

    class Bursty(QueueSet, prefix=prefix):
        paced = Queue(prefetch=8, limits=[RateLimit(2, per="1s", by="tenant", burst=2)])

    class Paced(Job[Bursty], queue=Bursty.paced, name=f"{prefix}.Paced"):
        tenant: str
        n: int

    if refuses_limits(backend):
        with pytest.raises(ConfigError, match=r"flow limits .*rate 2/1s burst 2 by tenant"):
            backend.consumer(Bursty.paced.config)
        return
    worker = Worker(Bursty, backend, concurrency=8)
    starts: list[float] = []

    @worker.handler(Paced)
    async def handle(job: Any, ctx: JobContext) -> None:
        starts.append(asyncio.get_running_loop().time())

    producer = await Producer.create(Bursty, backend)
    await producer.enqueue_many([Paced(tenant="a", n=n) for n in range(7)])
    await run_until(worker, lambda: len(starts) == 7, timeout=30)
    offsets = [round(t - starts[0], 2) for t in starts]
    assert offsets[2] < 0.3, offsets  # the burst: 3 in the first claim
    for i, first in enumerate(starts):  # then the pace: never 5 within a second (0.2 s margin)
        assert sum(1 for t in starts[i:] if t - first < 0.8) <= 4, offsets
    assert 1.8 <= offsets[-1] < 6, offsets  # 4 more at 0.5 s each
