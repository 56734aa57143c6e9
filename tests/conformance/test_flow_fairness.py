"""Fairness across keys on every backend with flow limits (memory, PostgreSQL): a key with a
long backlog held at its limit does not hold back the jobs of other keys enqueued behind it;
they start in the first claims, not after the backlog. RabbitMQ refuses flow limits
(test_flow_limits)."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from typing import Any

import pytest

from queuey import Concurrency, Job, JobContext, Producer, Queue, QueueSet, RateLimit, Worker
from queuey.backends.base import Backend
from queuey.backends.memory import MemoryBackend
from tests.helpers import run_until

BACKLOG = 500
OTHERS = "bcde"
EACH = 2  # jobs of each other tenant, enqueued after the backlog


def refuses_limits(backend: Backend) -> bool:
    return type(backend).__name__ == "RabbitMqBackend"


@pytest.fixture
def virtual_time_on_memory(backend: Backend, request: pytest.FixtureRequest) -> None:
    """Memory runs on the event loop's clock: in virtual time (looptime), so the bound holds
    whatever the machine's load; the servers' backends run in real time."""
    if isinstance(backend, MemoryBackend):
        request.node.add_marker(pytest.mark.looptime)


@pytest.mark.usefixtures("virtual_time_on_memory")
@pytest.mark.parametrize(
    "limit",
    [Concurrency(2, by="tenant"), RateLimit(4, per="1s", by="tenant", burst=1)],
    ids=["concurrency", "rate"],
)
async def test_other_keys_start_before_a_full_keys_backlog(
    backend: Backend, limit: Concurrency | RateLimit
) -> None:
    """The bound: each job of tenants b..e (2 each, enqueued after tenant a's 500) starts
    before tenant a's 5th start and within 1 s of the first start (a's limit lets 2 start at
    once, then one at a time), not after a's backlog."""
    if refuses_limits(backend):
        return  # RabbitMQ refuses flow limits: test_flow_limits checks the ConfigError
    prefix = f"f{uuid.uuid4().hex[:8]}"

    class Tenants(QueueSet, prefix=prefix):
        work = Queue(prefetch=16, limits=[limit])

    class Task(Job[Tenants], queue=Tenants.work, name=f"{prefix}.Task"):
        tenant: str
        n: int

    worker = Worker(Tenants, backend, concurrency=16)
    starts: dict[str, list[float]] = defaultdict(list)
    order: list[str] = []

    @worker.handler(Task)
    async def handle(job: Any, ctx: JobContext) -> None:
        starts[job.tenant].append(asyncio.get_running_loop().time())
        order.append(job.tenant)
        await asyncio.sleep(0.05)

    producer = await Producer.create(Tenants, backend)
    await producer.enqueue_many([Task(tenant="a", n=n) for n in range(BACKLOG)])
    await producer.enqueue_many([Task(tenant=t, n=n) for t in OTHERS for n in range(EACH)])
    others = len(OTHERS) * EACH
    await run_until(worker, lambda: sum(len(starts[t]) for t in OTHERS) == others, timeout=30)
    last_other = max(i for i, tenant in enumerate(order) if tenant in OTHERS)
    a_before = order[: last_other + 1].count("a")
    assert a_before < 5, order[: last_other + 1]
    first = min(min(times) for times in starts.values())
    latest = max(max(starts[t]) for t in OTHERS)
    assert latest - first < 1.0, (latest - first, order[:20])
    assert len(starts["a"]) < BACKLOG // 2, len(starts["a"])  # b..e did not wait for a's
