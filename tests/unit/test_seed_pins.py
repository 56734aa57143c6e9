"""Pins of seed behaviours that users see, written before the engine is reorganised: each test
states today's behaviour through the public API only (``Producer``, ``Worker``,
``MemoryBackend`` inspection, ``queuey.testing``), so a refactor that changes one fails here.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import timedelta

import pytest

from queuey import (
    Defer,
    Envelope,
    Job,
    JobContext,
    MemoryBackend,
    Producer,
    Queue,
    QueueSet,
    Retry,
    RetryPolicy,
    Worker,
)
from queuey.testing import run_until_idle

# -- the effective retry policy: the job's beats the queue's --------------------------------


class PinQueues(QueueSet, prefix="pin"):
    work = Queue(retry=RetryPolicy.fixed(4, "1m"))
    plain = Queue(prefetch=1)
    fifo = Queue(prefetch=1, max_priority=0)
    ranked = Queue(prefetch=1)


class OwnPolicy(Job[PinQueues], queue=PinQueues.work, retry=RetryPolicy.fixed(2, "10s")):
    label: str = "own"


class QueuePolicy(Job[PinQueues], queue=PinQueues.work):
    label: str = "inherited"


class Plain(Job[PinQueues], queue=PinQueues.plain):
    label: str = ""


class Fifo(Job[PinQueues], queue=PinQueues.fifo):
    label: str


class Ranked(Job[PinQueues], queue=PinQueues.ranked):
    label: str


async def _run_failing(job: Job[PinQueues]) -> tuple[list[tuple[int, int, float]], MemoryBackend]:
    """Run ``job`` with a handler that always fails; ``(attempt, max_attempts, loop time)``
    per run."""
    backend = MemoryBackend()
    producer = await Producer.create(PinQueues, backend)
    worker = Worker(PinQueues, backend)
    runs: list[tuple[int, int, float]] = []
    loop = asyncio.get_running_loop()

    async def fail(job: Job[PinQueues], ctx: JobContext) -> None:
        runs.append((ctx.attempt, ctx.max_attempts, loop.time()))
        raise Retry("always")

    worker.register(OwnPolicy, fail)
    worker.register(QueuePolicy, fail)
    await producer.enqueue(job)
    await run_until_idle(worker, backend, timeout=3600)
    return runs, backend


def _waits(runs: list[tuple[int, int, float]]) -> list[int]:
    return [round(b[2] - a[2]) for a, b in itertools.pairwise(runs)]


@pytest.mark.looptime
async def test_a_jobs_own_retry_policy_beats_its_queues() -> None:
    runs, backend = await _run_failing(OwnPolicy())
    assert [(attempt, most) for attempt, most, _ in runs] == [(1, 2), (2, 2)]
    assert _waits(runs) == [10]
    [(envelope, reason)] = backend.dead_letters("pin.work")
    assert envelope.attempt == 2
    assert reason == "max attempts (2) exhausted after attempt 2: always"


@pytest.mark.looptime
async def test_a_job_without_a_policy_inherits_its_queues() -> None:
    runs, backend = await _run_failing(QueuePolicy())
    assert [(attempt, most) for attempt, most, _ in runs] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert _waits(runs) == [60, 60, 60]
    [(_, reason)] = backend.dead_letters("pin.work")
    assert reason == "max attempts (4) exhausted after attempt 4: always"


def test_effective_retry_resolution() -> None:
    assert OwnPolicy.effective_retry() == RetryPolicy.fixed(2, "10s")
    assert QueuePolicy.effective_retry() == RetryPolicy.fixed(4, "1m")
    assert Plain.effective_retry() == RetryPolicy.none()


@pytest.mark.looptime
async def test_neither_policy_dead_letters_on_the_first_failure() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(PinQueues, backend)
    worker = Worker(PinQueues, backend)

    @worker.handler(Plain)
    async def fail(job: Plain, ctx: JobContext) -> None:
        raise Retry("once")

    await producer.enqueue(Plain())
    await run_until_idle(worker, backend)
    [(envelope, reason)] = backend.dead_letters("pin.plain")
    assert (envelope.attempt, reason) == (1, "max attempts (1) exhausted after attempt 1: once")
    assert backend.acked("pin.plain") == []


# -- the memory backend's acked(q) counts each replaced envelope ----------------------------


@pytest.mark.looptime
async def test_acked_counts_the_envelope_each_retry_replaces() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(PinQueues, backend)
    worker = Worker(PinQueues, backend)

    @worker.handler(QueuePolicy)
    async def flaky(job: QueuePolicy, ctx: JobContext) -> None:
        if ctx.attempt < 3:
            raise Retry("not yet")

    job_id = await producer.enqueue(QueuePolicy())
    await run_until_idle(worker, backend, timeout=3600)
    acked = backend.acked("pin.work")
    assert [(e.job_id, e.attempt) for e in acked] == [(job_id, 1), (job_id, 2), (job_id, 3)]
    assert backend.dead_letters("pin.work") == []


@pytest.mark.looptime
async def test_acked_counts_the_envelope_a_deferral_replaces() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(PinQueues, backend)
    worker = Worker(PinQueues, backend)

    @worker.handler(Ranked)
    async def once(job: Ranked, ctx: JobContext) -> None:
        if ctx.deferrals == 0:
            raise Defer("5s")

    await producer.enqueue(Ranked(label="x"))
    await run_until_idle(worker, backend, timeout=60)
    acked = backend.acked("pin.ranked")
    assert [(e.attempt, e.deferrals, e.priority) for e in acked] == [(1, 0, 0), (1, 1, 10)]


# -- close_backend_on_shutdown ---------------------------------------------------------------


async def test_close_backend_on_shutdown_closes_it_when_run_returns() -> None:
    backend = MemoryBackend()
    worker = Worker(PinQueues, backend, close_backend_on_shutdown=True)
    worker.shutdown()
    await worker.run()
    assert backend.is_closed()


async def test_by_default_the_backend_stays_open_after_run() -> None:
    backend = MemoryBackend()
    worker = Worker(PinQueues, backend)
    assert worker.close_backend_on_shutdown is False
    worker.shutdown()
    await worker.run()
    assert not backend.is_closed()
    producer = await Producer.create(PinQueues, backend)
    await producer.enqueue(Plain(label="after"))
    assert backend.pending("pin.plain") == 1


# -- max_priority = 0: deferred jobs come back FIFO ------------------------------------------


async def _drain(backend: MemoryBackend, queue: str) -> list[str]:
    consumer = backend.consumer(backend.queue_config(queue))
    labels = []
    while backend.pending(queue):
        delivery = await consumer.next()
        assert delivery is not None
        labels.append(delivery.envelope.payload["label"])
        await delivery.ack()
    await consumer.stop()
    return labels


@pytest.mark.looptime
async def test_max_priority_zero_brings_a_deferred_job_back_behind_pending_ones() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(PinQueues, backend)
    await producer.defer(Fifo(label="deferred"), "1s")
    await producer.defer(Ranked(label="deferred"), "1s")
    for label in ("first", "second"):
        await producer.enqueue(Fifo(label=label))
        await producer.enqueue(Ranked(label=label))
    await asyncio.sleep(2)
    assert await _drain(backend, "pin.fifo") == ["first", "second", "deferred"]
    assert await _drain(backend, "pin.ranked") == ["deferred", "first", "second"]


@pytest.mark.looptime
async def test_a_handlers_deferral_on_a_max_priority_zero_queue_goes_behind_the_backlog() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(PinQueues, backend)
    worker = Worker(PinQueues, backend, queues=[PinQueues.fifo], concurrency=1)
    order: list[tuple[str, str, int]] = []

    async def record(job: Fifo | Ranked, ctx: JobContext) -> None:
        order.append((ctx.queue, job.label, ctx.priority))
        if job.label == "a" and ctx.deferrals == 0:
            raise Defer(0)  # held for min_defer (1 s): due again while b runs
        if job.label == "b":
            await asyncio.sleep(2)

    worker.register(Fifo, record)
    for label in "abc":
        await producer.enqueue(Fifo(label=label))
    await run_until_idle(worker, backend)
    assert [(label, priority) for _, label, priority in order] == [
        ("a", 0),
        ("b", 0),
        ("c", 0),
        ("a", 0),
    ]
    order.clear()
    worker = Worker(PinQueues, backend, queues=[PinQueues.ranked], concurrency=1)
    worker.register(Ranked, record)
    for label in "abc":
        await producer.enqueue(Ranked(label=label))
    await run_until_idle(worker, backend)
    assert [(label, priority) for _, label, priority in order] == [
        ("a", 0),
        ("b", 0),
        ("a", 10),
        ("c", 0),
    ]


# -- Producer.undeclared ---------------------------------------------------------------------


async def test_an_undeclared_producer_declares_nothing_but_still_enqueues() -> None:
    backend = MemoryBackend()
    producer = Producer.undeclared(PinQueues, backend)  # synchronous: no I/O at all
    assert isinstance(producer, Producer)
    assert producer.queue_set is PinQueues and producer.backend is backend
    assert backend.queue_names() == []
    await producer.enqueue(Fifo(label="x"))
    assert backend.queue_names() == ["pin.fifo"]
    assert backend.pending("pin.fifo") == 1
    # The queue was never declared, so the memory backend made it with default options.
    assert backend.queue_config("pin.fifo").max_priority == 10
    # defer still takes the declared queue's top priority (from the set, not the backend).
    await producer.defer(Fifo(label="held"), "1m")
    assert backend.deferred("pin.fifo") == 1
    await backend.close()


async def test_a_created_producer_declares_every_queue_of_its_set() -> None:
    backend = MemoryBackend()
    await Producer.create(PinQueues, backend)
    assert backend.queue_names() == ["pin.fifo", "pin.plain", "pin.ranked", "pin.work"]
    assert backend.queue_config("pin.fifo").max_priority == 0


# -- JobContext.age --------------------------------------------------------------------------


async def test_job_context_age_is_time_since_the_first_enqueue() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(PinQueues, backend)
    worker = Worker(PinQueues, backend)
    ages: dict[str, timedelta] = {}

    @worker.handler(Fifo)
    async def record(job: Fifo, ctx: JobContext) -> None:
        ages[job.label] = ctx.age

    now_ms = time.time_ns() // 1_000_000
    old = Envelope.new(Fifo.job_name(), "pin.fifo", {"label": "old"})
    skewed = Envelope.new(Fifo.job_name(), "pin.fifo", {"label": "future"})
    await backend.publish(
        [
            old.model_copy(update={"enqueued_at_ms": now_ms - 5000}),
            skewed.model_copy(update={"enqueued_at_ms": now_ms + 60_000}),
        ]
    )
    await producer.enqueue(Fifo(label="fresh"))
    await run_until_idle(worker, backend)
    assert all(isinstance(age, timedelta) for age in ages.values())
    assert timedelta(seconds=5) <= ages["old"] < timedelta(seconds=65)
    assert ages["future"] == timedelta(0)  # a clock ahead of ours never makes it negative
    assert timedelta(0) <= ages["fresh"] < timedelta(seconds=60)


async def test_job_context_age_grows_while_a_job_waits() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(PinQueues, backend)
    worker = Worker(PinQueues, backend)
    ages: list[timedelta] = []

    @worker.handler(OwnPolicy)
    async def record(job: OwnPolicy, ctx: JobContext) -> None:
        ages.append(ctx.age)
        if ctx.deferrals == 0:
            raise Defer("200ms")

    await producer.enqueue(OwnPolicy())
    await run_until_idle(worker, backend, timeout=10)
    assert len(ages) == 2
    assert ages[1] - ages[0] >= timedelta(milliseconds=150)


# -- Defer's display text --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delay", "reason", "text"),
    [
        ("30s", "busy", "job deferred for 30s: busy"),
        ("500ms", "later", "job deferred for 0.5s: later"),
        (1.5, None, "job deferred for 1.5s: deferred"),
        (timedelta(minutes=2), "rate limited", "job deferred for 120s: rate limited"),
        (0, None, "job deferred for 0s: deferred"),
    ],
)
def test_defer_display_text(delay: str | float, reason: str | None, text: str) -> None:
    signal = Defer(delay) if reason is None else Defer(delay, reason)
    assert str(signal) == text
    assert signal.reason == (reason or "deferred")
