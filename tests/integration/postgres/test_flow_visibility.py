"""What flow limits hold back is visible: the claims count it (``throttled``, no extra query)
and the metrics carry it as ``queuey_jobs_throttled_total`` and ``queuey_jobs_held_back``, on
PostgreSQL and memory alike; ``queuey status --queues`` shows each limited queue's limits and
the due rows they hold back now."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.memory import MemoryBackend
from queuey.backends.postgres import PostgresBackend
from queuey.limits import Concurrency, RateLimit, ThrottleBackend
from queuey.observability import Metrics
from queuey.worker import declared_limits
from tests.helpers import ROOT, python_path

pytestmark = pytest.mark.postgres


class SeenQueues(QueueSet, prefix="seen"):
    one = Queue(prefetch=8, limits=[Concurrency(1)])
    free = Queue(prefetch=8)


class One(Job[SeenQueues], queue=SeenQueues.one, name="seen.One"):
    n: int


class Free(Job[SeenQueues], queue=SeenQueues.free, name="seen.Free"):
    n: int


@pytest.fixture
async def pg(database_url: str, pg_schema: str) -> AsyncIterator[PostgresBackend]:
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="5s") as backend:
        yield backend


async def test_a_capped_queue_counts_its_throttled_claims_on_postgres(
    pg: PostgresBackend,
) -> None:
    await throttled_claims_are_counted(pg)


def sample(metrics: Metrics, name: str, queue: str, limit: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"queue": f"seen.{queue}", "limit": limit})


async def throttled_claims_are_counted(backend: PostgresBackend | MemoryBackend) -> None:
    assert isinstance(backend, ThrottleBackend)
    producer = await Producer.create(SeenQueues, backend)
    for n in range(3):
        await producer.enqueue(One(n=n))
        await producer.enqueue(Free(n=n))
    metrics = Metrics(depth_interval=0.05)
    worker = Worker(SeenQueues, backend, concurrency=8, metrics=metrics)
    release, started, done = asyncio.Event(), asyncio.Event(), [0]

    @worker.handler(One)
    async def one(job: One, ctx: JobContext) -> None:
        started.set()
        await release.wait()
        done[0] += 1

    @worker.handler(Free)
    async def free(job: Free, ctx: JobContext) -> None:
        done[0] += 1

    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 20)
        # while the first runs, the other two are held back by the cap of 1
        for _ in range(200):
            if (sample(metrics, "queuey_jobs_held_back", "one", "concurrency") or 0) >= 2:
                break
            await asyncio.sleep(0.05)
        assert sample(metrics, "queuey_jobs_held_back", "one", "concurrency") == 2
        assert (sample(metrics, "queuey_jobs_throttled_total", "one", "concurrency") or 0) >= 1
        release.set()
        for _ in range(400):
            if done[0] == 6:
                break
            await asyncio.sleep(0.05)
        assert done[0] == 6
    finally:
        release.set()
        worker.shutdown()
        await task
    seen = {(t.queue, t.limit): t for t in backend.throttled()}
    assert set(seen) == {("seen.one", "concurrency")}  # a queue without limits is not counted
    assert seen[("seen.one", "concurrency")].claims >= 2  # held 2, then 1
    assert seen[("seen.one", "concurrency")].held == 0  # the last claim held nothing back
    assert sample(metrics, "queuey_jobs_throttled_total", "free", "concurrency") is None


class LimitQueues(QueueSet, prefix="held"):
    capped = Queue(limits=[Concurrency(1)])
    typed = Queue()
    plain = Queue()


class Capped(Job[LimitQueues], queue=LimitQueues.capped, name="held.Capped"):
    n: int


class Typed(Job[LimitQueues], queue=LimitQueues.typed, name="held.Typed",
            limits=[RateLimit(1, per="1h", by="n")]):  # fmt: skip
    n: int


def status(url: str, schema: str, *extra: str) -> subprocess.CompletedProcess[str]:
    target = f"{__name__}:LimitQueues"
    return subprocess.run(
        [sys.executable, "-m", "queuey", "status", "--schema", schema, "--queues", target, *extra],
        env={**os.environ, "PYTHONPATH": python_path(), "QUEUEY_DATABASE_URL": url},
        capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
    )  # fmt: skip


async def test_status_shows_the_limits_and_what_they_hold_back(
    pg: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(LimitQueues, pg)
    for n in range(3):
        await producer.enqueue(Capped(n=n))
    for n in (1, 1, 2):  # key 1 twice under a rate of 1/h per key
        await producer.enqueue(Typed(n=n))
    capped = LimitQueues.capped.config
    typed = LimitQueues.typed.config
    typed = replace(typed, limits=declared_limits(LimitQueues, typed.name))
    assert len(await pg.claim(capped, 16) or []) == 1  # the cap of 1: one runs, two wait
    assert len(await pg.claim(typed, 16) or []) == 2  # one start per key: key 1's second waits

    result = status(database_url, pg_schema, "--json")
    assert result.returncode == 0, result.stderr
    limits = {row["queue"]: row for row in json.loads(result.stdout)["limits"]}
    assert set(limits) == {"held.capped", "held.typed"}  # a queue without limits is not listed
    assert limits["held.capped"]["limits"] == ["concurrency 1"]
    assert (limits["held.capped"]["held_concurrency"], limits["held.capped"]["held_rate"]) == (2, 0)
    assert limits["held.typed"]["limits"] == ["rate 1/3600s of held.Typed by n"]
    assert (limits["held.typed"]["held_concurrency"], limits["held.typed"]["held_rate"]) == (0, 1)

    table = status(database_url, pg_schema)
    assert table.returncode == 0, table.stderr
    assert "flow limits" in table.stdout and "concurrency 1" in table.stdout
