"""``queuey.sync.Producer`` on the memory backend: through a loop thread of its own, or on the
running loop of another thread that a worker shares; from many threads at once; with the same
checks as the async producer (foreign jobs, priorities)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from queuey import (
    ConfigError,
    Job,
    JobContext,
    MemoryBackend,
    Queue,
    QueueSet,
    ShutDownError,
    Worker,
    sync,
)
from queuey.testing import run_until_idle


class SyncQueues(QueueSet, prefix="sync"):
    work = Queue(prefetch=8, max_priority=5)
    flat = Queue(max_priority=0)


class Other(QueueSet, prefix="other"):
    work = Queue()


class Work(Job[SyncQueues], queue=SyncQueues.work, name="sync.Work"):
    n: int


class Flat(Job[SyncQueues], queue=SyncQueues.flat, name="sync.Flat"):
    n: int = 0


class Foreign(Job[Other], queue=Other.work, name="other.Foreign"):
    n: int = 0


@pytest.fixture
def threaded() -> Iterator[tuple[MemoryBackend, sync.ThreadedBackend]]:
    memory = MemoryBackend()
    with sync.ThreadedBackend(memory) as backend:
        yield memory, backend


def pending(memory: MemoryBackend, backend: sync.ThreadedBackend, queue: str) -> list[Any]:
    """The pending envelopes of ``queue``, read on the backend's own loop."""

    async def read() -> list[Any]:
        return memory.pending_envelopes(queue)

    return backend._call(read())


def test_every_method_publishes_on_its_own_loop_thread(
    threaded: tuple[MemoryBackend, sync.ThreadedBackend],
) -> None:
    memory, backend = threaded
    producer = sync.Producer.create(SyncQueues, backend)
    first = producer.enqueue(Work(n=1))
    urgent = producer.enqueue(Work(n=2), priority=5)
    many = producer.enqueue_many([Work(n=3), Work(n=4)], priority=1)
    producer.enqueue_after(Work(n=5), "1h")
    producer.defer(Work(n=6), "1h")
    envelopes = pending(memory, backend, "sync.work")
    assert [e.job_id for e in envelopes] == [urgent, *many, first]
    assert [e.priority for e in envelopes] == [5, 1, 1, 0]
    assert memory.delayed("sync.work") == 1 and memory.deferred("sync.work") == 1


def test_a_priority_outside_the_queues_range_names_the_queue_and_range(
    threaded: tuple[MemoryBackend, sync.ThreadedBackend],
) -> None:
    producer = sync.Producer.create(SyncQueues, threaded[1])
    with pytest.raises(ValueError, match=r"priority 6 is out of range for queue 'sync.work': 0..5"):
        producer.enqueue(Work(n=1), priority=6)
    with pytest.raises(ValueError, match=r"'sync.flat': 0..0"):
        producer.enqueue_many([Work(n=1), Flat()], priority=1)
    with pytest.raises(ValueError, match="out of range"):
        producer.enqueue_after(Work(n=1), "1s", priority=-1)
    with pytest.raises(TypeError, match="priority must be an int"):
        producer.enqueue(Work(n=1), priority=True)
    assert pending(*threaded, "sync.work") == [] and pending(*threaded, "sync.flat") == []


def test_a_job_of_another_queue_set_is_refused(
    threaded: tuple[MemoryBackend, sync.ThreadedBackend],
) -> None:
    producer = sync.Producer.create(SyncQueues, threaded[1])
    with pytest.raises(TypeError, match="Foreign belongs to Other, not SyncQueues"):
        producer.enqueue(Foreign())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="enqueue_after delay"):
        producer.enqueue_after(Work(n=1), "soon")


def test_eight_threads_enqueueing_at_once_lose_nothing(
    threaded: tuple[MemoryBackend, sync.ThreadedBackend],
) -> None:
    producer = sync.Producer.create(SyncQueues, threaded[1])
    start = threading.Barrier(8)
    ids: list[list[str]] = [[] for _ in range(8)]

    def enqueue(slot: int) -> None:
        start.wait()
        for n in range(50):
            ids[slot].append(producer.enqueue(Work(n=slot * 1000 + n)))
        ids[slot].extend(producer.enqueue_many([Work(n=-slot), Work(n=-slot - 100)]))

    threads = [threading.Thread(target=enqueue, args=(slot,)) for slot in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    published = {e.job_id for e in pending(*threaded, "sync.work")}
    assert published == {job_id for slot in ids for job_id in slot}
    assert len(published) == 8 * 52


def test_closed_and_unopened_backends_refuse_work() -> None:
    backend = sync.ThreadedBackend(MemoryBackend())
    with pytest.raises(ShutDownError, match="open it first"):
        sync.Producer.create(SyncQueues, backend)
    backend.open()
    backend.close()
    backend.close()  # idempotent
    with pytest.raises(ShutDownError, match="closed"):
        backend.open()


async def test_a_worker_loop_shares_its_memory_backend_with_sync_code() -> None:
    memory = MemoryBackend()
    seen: list[int] = []
    worker = Worker(SyncQueues, memory, queues=[SyncQueues.work])

    @worker.handler(Work)
    async def handle(job: Work, ctx: JobContext) -> None:
        seen.append(job.n)

    backend = sync.ThreadedBackend(memory, loop=asyncio.get_running_loop())
    backend.open()

    def view() -> list[str]:  # sync code, e.g. a Flask view run in a thread
        producer = sync.Producer.create(SyncQueues, backend)
        return [producer.enqueue(Work(n=n)) for n in range(3)]

    ids = await asyncio.to_thread(view)
    await run_until_idle(worker, memory)
    assert sorted(seen) == [0, 1, 2] and len(ids) == 3
    with pytest.raises(RuntimeError, match="own event loop"):
        sync.Producer.undeclared(SyncQueues, backend).enqueue(Work(n=9))
    backend.close()
    assert not memory.is_closed()  # the worker's backend stays the worker's


def test_cancel_a_pending_job(threaded: tuple[MemoryBackend, sync.ThreadedBackend]) -> None:
    memory, backend = threaded
    producer = sync.Producer.create(SyncQueues, backend)
    job_id = producer.enqueue(Work(n=1))
    later = producer.enqueue_after(Work(n=2), "1h")
    assert producer.cancel(job_id) == "cancelled"
    assert producer.cancel(later) == "cancelled"
    assert producer.cancel(job_id) == "not_found"
    assert pending(memory, backend, "sync.work") == []
    assert [e.job_id for e in memory.cancelled("sync.work")] == [job_id, later]
    assert memory.delayed("sync.work") == 0
