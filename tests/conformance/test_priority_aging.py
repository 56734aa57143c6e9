"""Priority aging on memory and PostgreSQL: a low-priority job that waits behind an 8-second
stream of top-priority jobs (always a backlog of them) still starts within the stated bound,
``(max_priority - p) * priority_aging`` plus the top-priority jobs due before it, while the
stream goes on; without aging the same job waits for the whole stream."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from queuey import ConfigError, Job, JobContext, MemoryBackend, Producer, Queue, QueueSet, Worker
from queuey.backends.base import Backend

STREAM_SECS = 8.0
AGING = 0.5  # seconds per level: priority 0 reaches the top (10) after 5 s
TOP = 10


@pytest.fixture
def virtual_time_on_memory(backend: Backend, request: pytest.FixtureRequest) -> None:
    """Memory runs on the event loop's clock: in virtual time (looptime), so the 8-second
    stream costs no wall time there; the servers' backends run in real time."""
    if isinstance(backend, MemoryBackend):
        request.node.add_marker(pytest.mark.looptime)


def make_set(aging: float | None) -> tuple[type[QueueSet], type[Job[Any]]]:
    prefix = f"a{uuid.uuid4().hex[:8]}"

    class Aged(QueueSet, prefix=prefix):
        work = Queue(prefetch=1, max_priority=TOP, priority_aging=aging)

    class Step(Job[Aged], queue=Aged.work, name=f"{prefix}.Step"):
        label: str

    return Aged, Step


async def low_waits(backend: Backend, aging: float | None) -> tuple[float, float, float]:
    """Run the stream; return when the low job started (seconds after it was enqueued), when
    the last top-priority job was enqueued, and the low job's enqueue time (all on one clock
    whose zero is the stream's start)."""
    if type(backend).__name__ == "RabbitMqBackend":
        pytest.skip("priority aging is claimed by the database (PostgreSQL) or memory")
    queues, step = make_set(aging)
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend, concurrency=1)
    started: dict[str, float] = {}
    clock = asyncio.get_running_loop().time  # virtual on memory (looptime), real elsewhere
    zero = clock()

    @worker.handler(step)
    async def handle(job: Any, ctx: JobContext) -> None:
        started.setdefault(job.label, clock() - zero)
        await asyncio.sleep(0.02)  # 50 jobs/s at most: the stream below sends 100/s

    async def stream() -> float:
        last, n = 0.0, 0
        while (last := clock() - zero) < STREAM_SECS:
            await producer.enqueue(step(label=f"high-{n}"), priority=TOP)
            n += 1
            await asyncio.sleep(0.01)
        return last

    running = asyncio.create_task(worker.run())
    try:
        sending = asyncio.create_task(stream())
        await asyncio.sleep(0.3)  # a backlog of top-priority jobs builds up
        enqueued = clock() - zero
        await producer.enqueue(step(label="low"), priority=0)
        last = await sending
        async with asyncio.timeout(60):
            while "low" not in started:
                await asyncio.sleep(0.05)
    finally:
        worker.shutdown(force=True)
        await running
    return started["low"] - enqueued, last, enqueued


@pytest.mark.usefixtures("virtual_time_on_memory")
async def test_a_low_priority_job_starts_within_the_bound_behind_a_steady_stream(
    backend: Backend,
) -> None:
    waited, last, enqueued = await low_waits(backend, AGING)
    bound = TOP * AGING  # 5 s to reach the top rank; then only older top jobs go first
    assert waited <= bound + 1.5, f"the low job waited {waited:.2f}s (bound {bound:.1f}s)"
    assert enqueued + waited < last  # it started while the stream still ran


@pytest.mark.usefixtures("virtual_time_on_memory")
async def test_without_aging_the_stream_starves_it(backend: Backend) -> None:
    waited, last, enqueued = await low_waits(backend, None)
    assert enqueued + waited > last  # strict priority: only after the whole stream


def test_aging_needs_a_priority_queue() -> None:
    with pytest.raises(ConfigError, match=r"priority_aging: needs a priority queue"):

        class Flat(QueueSet, prefix="flat"):
            work = Queue(max_priority=0, priority_aging="1s")
