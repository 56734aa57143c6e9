"""One rule for a unique key on every backend that has them (PostgreSQL, memory): a key names
at most one job waiting to run; a debounce (``on_conflict="replace"``) keeps the newest update
behind the run in progress; a job that comes back to pending (a retry, a deferral) takes its key
back, and is superseded when a newer job holds it by then; the enqueue says what it did."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from queuey import Defer, JobContext, Producer, Retry, RetryPolicy, Unique, Worker
from queuey.backends.base import Backend
from queuey.unique import State
from tests.conformance.test_unique import kit, needs_unique

DEBOUNCE = Unique(by=("account_id",), on_conflict="replace")


async def until(check: Callable[[], bool], timeout: float = 15) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)


async def test_a_debounce_while_the_holder_runs_leaves_one_successor_with_the_latest_payload(
    backend: Backend,
) -> None:
    needs_unique(backend)
    queues, Sync = kit(DEBOUNCE)
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend, concurrency=4)
    started, release = asyncio.Event(), asyncio.Event()
    events: list[tuple[str, str]] = []

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        events.append(("start", job.note))
        if job.note == "edit 1":
            started.set()
            await release.wait()
        events.append(("end", job.note))

    first = await producer.enqueue(Sync(account_id=3, note="edit 1"))
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 10)
        second = await producer.enqueue(Sync(account_id=3, note="edit 2"))
        assert (second.outcome, second.inserted) == ("inserted", True) and second != first
        third = await producer.enqueue(Sync(account_id=3, note="edit 3"))
        assert (third.outcome, third) == ("replaced", second)
        other = await producer.enqueue(Sync(account_id=4, note="other"))
        await until(lambda: ("end", "other") in events)
        await asyncio.sleep(0.5)
        assert ("start", "edit 3") not in events  # never beside the run it follows
        release.set()
        await until(lambda: ("end", "edit 3") in events)
    finally:
        release.set()
        worker.shutdown()
        await task
    assert other.outcome == "inserted"
    notes = [note for what, note in events if what == "start" and note != "other"]
    assert notes == ["edit 1", "edit 3"]
    assert events.index(("end", "edit 1")) < events.index(("start", "edit 3"))


async def test_the_result_tells_inserted_replaced_and_skipped_apart(backend: Backend) -> None:
    needs_unique(backend)
    queues, Skip = kit(Unique(by=("account_id",)))
    producer = await Producer.create(queues, backend)
    first, again = await producer.enqueue_many([Skip(account_id=1), Skip(account_id=1)])
    assert (first.outcome, again.outcome, again) == ("inserted", "skipped", first)
    assert (await producer.enqueue(Skip(account_id=1))).outcome == "skipped"
    queues, Debounced = kit(DEBOUNCE)
    producer = await Producer.create(queues, backend)
    first, again = await producer.enqueue_many(
        [Debounced(account_id=1, note="a"), Debounced(account_id=1, note="b")], delay="1h"
    )
    assert (first.outcome, again.outcome, again) == ("inserted", "replaced", first)
    later = await producer.enqueue_after(Debounced(account_id=1, note="c"), "1h")
    assert (later.outcome, later.inserted, later) == ("replaced", False, first)


async def test_a_debounce_that_keeps_done_skips_while_the_holder_runs(backend: Backend) -> None:
    needs_unique(backend)
    states: tuple[State, ...] = ("pending", "running", "done")
    queues, Sync = kit(Unique(by=("account_id",), states=states, on_conflict="replace"))
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend)
    started, release = asyncio.Event(), asyncio.Event()
    notes: list[str] = []

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        notes.append(job.note)
        started.set()
        await release.wait()

    first = await producer.enqueue(Sync(account_id=1, note="once"))
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 10)
        again = await producer.enqueue(Sync(account_id=1, note="twice"))
        assert (again.outcome, again) == ("skipped", first)  # done keeps the key: no successor
        release.set()
        await until(lambda: worker.stats[Sync.job_queue().name].succeeded == 1)
    finally:
        release.set()
        worker.shutdown()
        await task
    assert (await producer.enqueue(Sync(account_id=1, note="after"))).outcome == "skipped"
    assert notes == ["once"]


@pytest.mark.parametrize(
    ("unique", "signal"),
    [
        (Unique(by=("account_id",), states=("pending",)), "retry"),
        (Unique(by=("account_id",), states=("pending",)), "defer"),
        (DEBOUNCE, "retry"),
        (DEBOUNCE, "defer"),
    ],
    ids=["pending-only-retry", "pending-only-defer", "debounce-retry", "debounce-defer"],
)
async def test_a_job_coming_back_while_a_newer_one_holds_its_key_is_superseded(
    backend: Backend, unique: Unique, signal: str, caplog: pytest.LogCaptureFixture
) -> None:
    needs_unique(backend)
    caplog.set_level(logging.INFO, logger="queuey")
    queues, Sync = kit(unique, retry=RetryPolicy.fixed(3, "100ms"))
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend, concurrency=4, min_defer="100ms")
    started, release = asyncio.Event(), asyncio.Event()
    runs: list[tuple[str, int, int]] = []

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append((job.note, ctx.attempt, ctx.deferrals))
        if job.note == "older":
            started.set()
            await release.wait()
            raise Retry("not now") if signal == "retry" else Defer(0, "not now")

    older = await producer.enqueue(Sync(account_id=1, note="older"))
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 10)
        # Due in a second: it still waits, holding the key, when the older one comes back.
        newer = await producer.enqueue_after(Sync(account_id=1, note="newer"), "1s")
        assert newer.outcome == "inserted" and newer != older
        release.set()
        await until(lambda: ("newer", 1, 0) in runs)
        await asyncio.sleep(0.8)  # the older one's retry or deferral would be due by now
    finally:
        release.set()
        worker.shutdown()
        await task
    assert runs == [("older", 1, 0), ("newer", 1, 0)]
    info = await producer.job(older)
    assert info is not None and info.state == "cancelled"
    assert info.last_error is not None
    assert info.last_error.startswith(f"superseded: job {newer} holds its unique key")
    # The worker reports what the backend did: the job ended cancelled, not a retry/deferral.
    said = [r.getMessage() for r in caplog.records if older in r.getMessage()]
    assert not [line for line in said if "retry in" in line or "deferred for" in line], said
    ended = [line for line in said if "ended cancelled, superseded by job" in line]
    assert len(ended) == 1 and str(newer) in ended[0] and "not now" in ended[0], said
    counts = [(s.retried, s.deferred, s.cancelled, s.succeeded) for s in worker.stats.values()]
    assert [c for c in counts if any(c)] == [(0, 0, 1, 1)]


@pytest.mark.parametrize("signal", ["retry", "defer"])
async def test_a_job_coming_back_takes_its_key_back(backend: Backend, signal: str) -> None:
    needs_unique(backend)
    queues, Sync = kit(
        Unique(by=("account_id",), states=("pending",)), retry=RetryPolicy.fixed(3, "1s")
    )
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend, min_defer="1s")
    runs: list[str] = []

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append(job.note)
        if len(runs) == 1:
            raise Retry("later") if signal == "retry" else Defer("1s", "later")

    first = await producer.enqueue(Sync(account_id=1, note="first"))
    task = asyncio.create_task(worker.run())
    try:
        stats = worker.stats
        await until(lambda: any(s.retried + s.deferred for s in stats.values()))
        again = await producer.enqueue(Sync(account_id=1, note="duplicate"))
        assert (again.outcome, again) == ("skipped", first)  # waiting to run again: it holds
        await until(lambda: len(runs) == 2)
        await asyncio.sleep(0.3)
    finally:
        worker.shutdown()
        await task
    assert runs == ["first", "first"]


@pytest.mark.parametrize("unique", [Unique(by=("account_id",), states=("pending",)), DEBOUNCE])
async def test_a_job_handed_back_at_shutdown_while_a_newer_one_holds_its_key_is_superseded(
    backend: Backend, unique: Unique
) -> None:
    needs_unique(backend)
    queues, Sync = kit(unique)
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend, shutdown_grace="200ms")
    started = asyncio.Event()

    @worker.handler(Sync)
    async def handle(job: Any, ctx: JobContext) -> None:
        started.set()
        await asyncio.Event().wait()  # until shutdown cancels it: handed back, not failed

    older = await producer.enqueue(Sync(account_id=1, note="older"))
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 10)
        newer = await producer.enqueue_after(Sync(account_id=1, note="newer"), "1h")
        assert newer.outcome == "inserted"
    finally:
        worker.shutdown()
        await task
    info = await producer.job(older)
    assert info is not None and info.state == "cancelled"
    assert info.last_error is not None and info.last_error.startswith(f"superseded: job {newer}")
    newest = await producer.job(newer)
    assert newest is not None and newest.state == "pending"
