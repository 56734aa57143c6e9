"""Unique jobs, the same on every backend that has them (PostgreSQL and memory); RabbitMQ
refuses them at ``Producer.create``."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from queuey import (
    ConfigError,
    EnqueueResult,
    Fatal,
    Job,
    JobContext,
    Producer,
    Queue,
    QueueSet,
    Retry,
    RetryPolicy,
    Unique,
    Worker,
)
from queuey.backends.base import Backend, UniqueBackend
from queuey.unique import State
from tests.helpers import run_until


def kit(unique: Unique, *, retry: RetryPolicy | None = None) -> tuple[type[QueueSet], type[Any]]:
    prefix = f"u{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        sync = Queue(prefetch=4, retry=retry)

    class Sync(Job[Queues], queue=Queues.sync, name=f"{prefix}.Sync", unique=unique):
        account_id: int
        note: str = ""
        fail: bool = False

    return Queues, Sync


def needs_unique(backend: Backend) -> None:
    if not isinstance(backend, UniqueBackend):
        pytest.skip("this backend has no unique jobs")


async def pending(backend: Backend, job: type[Any]) -> int:
    return await backend.count_pending(job.job_queue().name)


async def test_a_duplicate_is_skipped_and_the_caller_gets_the_first_id(backend: Backend) -> None:
    needs_unique(backend)
    queues, Sync = kit(Unique(by=("account_id",)))
    producer = await Producer.create(queues, backend)
    first = await producer.enqueue(Sync(account_id=1, note="a"))
    again = await producer.enqueue(Sync(account_id=1, note="b"))
    other = await producer.enqueue(Sync(account_id=2))
    assert isinstance(first, EnqueueResult) and isinstance(first, str)
    assert (first.inserted, again.inserted, other.inserted) == (True, False, True)
    assert again == first and again.job_id == first.job_id and other != first
    assert await pending(backend, Sync) == 2
    worker = Worker(queues, backend)
    notes: list[str] = []

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        notes.append(f"{job.account_id}{job.note}")

    await run_until(worker, lambda: len(notes) == 2)
    assert sorted(notes) == ["1a", "2"]


async def test_replace_debounces_a_pending_job(backend: Backend) -> None:
    needs_unique(backend)
    queues, Sync = kit(Unique(by=("account_id",), on_conflict="replace"))
    producer = await Producer.create(queues, backend)
    first = await producer.enqueue_after(Sync(account_id=1, note="old"), "1h")
    again = await producer.enqueue(Sync(account_id=1, note="new"))
    assert again == first and not again.inserted
    assert await pending(backend, Sync) == 1  # due now: it took the new due time
    worker = Worker(queues, backend)
    notes: list[tuple[str, str]] = []

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        notes.append((ctx.job_id, job.note))

    await run_until(worker, lambda: len(notes) == 1)
    assert notes == [(first.job_id, "new")]


async def test_done_and_dead_release_the_key_by_default(backend: Backend) -> None:
    needs_unique(backend)
    queues, Sync = kit(Unique(by=("account_id",)))
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend)
    runs: list[int] = []

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append(job.account_id)
        if job.fail:
            raise Fatal("no")

    await producer.enqueue(Sync(account_id=1))
    await producer.enqueue(Sync(account_id=2, fail=True))
    await run_until(worker, lambda: len(runs) == 2)
    assert (await producer.enqueue(Sync(account_id=1))).inserted
    assert (await producer.enqueue(Sync(account_id=2))).inserted


async def test_done_and_failed_in_the_states_keep_the_key(backend: Backend) -> None:
    needs_unique(backend)
    states: tuple[State, ...] = ("pending", "running", "done", "failed")
    queues, Sync = kit(Unique(by=("account_id",), states=states))
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend)
    runs: list[int] = []

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append(job.account_id)
        if job.fail:
            raise Fatal("no")

    done = await producer.enqueue(Sync(account_id=1))
    dead = await producer.enqueue(Sync(account_id=2, fail=True))
    await run_until(worker, lambda: len(runs) == 2)
    again, again_dead = await producer.enqueue_many([Sync(account_id=1), Sync(account_id=2)])
    assert (again, again.inserted) == (done, False)
    assert (again_dead, again_dead.inserted) == (dead, False)


async def test_pending_only_lets_a_duplicate_in_while_the_first_runs(backend: Backend) -> None:
    needs_unique(backend)
    queues, Sync = kit(Unique(by=("account_id",), states=("pending",)))
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend)
    started, release = asyncio.Event(), asyncio.Event()
    runs: list[str] = []

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append(job.note)
        started.set()
        await release.wait()

    first = await producer.enqueue(Sync(account_id=1, note="first"))
    assert not (await producer.enqueue(Sync(account_id=1))).inserted
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 10)
        second = await producer.enqueue(Sync(account_id=1, note="second"))
        assert second.inserted and second != first
        release.set()
        async with asyncio.timeout(10):
            while len(runs) < 2:
                await asyncio.sleep(0.01)
    finally:
        worker.shutdown()
        await task
    assert runs == ["first", "second"]


async def test_a_retry_keeps_the_key(backend: Backend) -> None:
    needs_unique(backend)
    queues, Sync = kit(Unique(by=("account_id",)), retry=RetryPolicy.fixed(3, "400ms"))
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend)
    runs: list[int] = []

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append(ctx.attempt)
        if ctx.attempt == 1:
            raise Retry("later")

    first = await producer.enqueue(Sync(account_id=1))
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(10):
            while worker.stats[Sync.job_queue().name].retried < 1:
                await asyncio.sleep(0.01)
        again = await producer.enqueue(Sync(account_id=1))  # waiting for its retry: held
        assert (again, again.inserted) == (first, False)
        async with asyncio.timeout(10):
            while len(runs) < 2:
                await asyncio.sleep(0.01)
    finally:
        worker.shutdown()
        await task
    assert runs == [1, 2]


async def test_enqueue_many_reports_per_job(backend: Backend) -> None:
    needs_unique(backend)
    queues, Sync = kit(Unique(by=("account_id",)))
    producer = await Producer.create(queues, backend)
    held = await producer.enqueue(Sync(account_id=1))
    results = await producer.enqueue_many(
        [Sync(account_id=1), Sync(account_id=2), Sync(account_id=2), Sync(account_id=3)]
    )
    assert [r.inserted for r in results] == [False, True, False, True]
    assert results[0] == held and results[2] == results[1]
    assert len({results[1], results[3], held}) == 3
    assert await pending(backend, Sync) == 3


async def test_enqueue_many_replace_in_one_call_keeps_the_last_payload(backend: Backend) -> None:
    needs_unique(backend)
    queues, Sync = kit(Unique(by=("account_id",), on_conflict="replace"))
    producer = await Producer.create(queues, backend)
    results = await producer.enqueue_many(
        [Sync(account_id=1, note="a"), Sync(account_id=1, note="b")], delay="1h"
    )
    assert [r.inserted for r in results] == [True, False] and results[0] == results[1]
    again = await producer.enqueue(Sync(account_id=1, note="c"))
    assert again == results[0]
    worker = Worker(queues, backend)
    notes: list[str] = []

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        notes.append(job.note)

    await run_until(worker, lambda: len(notes) == 1)
    assert notes == ["c"]


async def test_the_period_bucket_joins_the_key(backend: Backend) -> None:
    needs_unique(backend)
    queues, Sync = kit(Unique(by=("account_id",), period="2s"))
    producer = await Producer.create(queues, backend)
    while time.time() % 2 > 0.5:  # start early in a bucket (both clocks are the machine's)
        await asyncio.sleep(0.05)
    first = await producer.enqueue(Sync(account_id=1))
    again = await producer.enqueue(Sync(account_id=1))
    assert first.inserted and (again, again.inserted) == (first, False)
    await asyncio.sleep(2)
    later = await producer.enqueue(Sync(account_id=1))
    assert later.inserted and later != first


async def test_a_job_type_and_its_fields_make_the_key(backend: Backend) -> None:
    needs_unique(backend)
    queues, Sync = kit(Unique())  # no fields: one key for the whole job type

    class Other(Job[queues], queue=queues.sync, unique=Unique()):  # type: ignore[valid-type]
        account_id: int

    producer = await Producer.create(queues, backend)
    assert (await producer.enqueue(Sync(account_id=1))).inserted
    assert not (await producer.enqueue(Sync(account_id=2))).inserted
    assert (await producer.enqueue(Other(account_id=1))).inserted
    assert (await producer.defer(Other(account_id=3), "1s")).inserted is False


@pytest.mark.rabbitmq
async def test_rabbitmq_refuses_unique_jobs(backend: Backend) -> None:
    if isinstance(backend, UniqueBackend):
        pytest.skip("this backend has unique jobs")
    queues, _ = kit(Unique(by=("account_id",)))
    with pytest.raises(ConfigError, match="unique jobs need PostgreSQL or memory"):
        await Producer.create(queues, backend)


async def test_a_cancelled_job_releases_its_key(backend: Backend) -> None:
    needs_unique(backend)
    queues, Sync = kit(Unique(by=("account_id",)))
    producer = await Producer.create(queues, backend)
    first = await producer.enqueue_after(Sync(account_id=1), "1h")
    assert await producer.cancel(first) == "cancelled"
    again = await producer.enqueue(Sync(account_id=1))
    assert again.inserted and again != first
