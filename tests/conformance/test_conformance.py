"""One behavioural suite, run against every backend (River's driver-test idea): the memory
backend's fidelity is proven here, not assumed."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from queuey import (
    Defer,
    Envelope,
    Fatal,
    Job,
    JobContext,
    Producer,
    Queue,
    QueueSet,
    Retry,
    RetryPolicy,
    Worker,
)
from queuey.backends.base import Backend
from tests.helpers import run_until


@dataclass
class Kit:
    """Per-test queue set and job classes with a unique prefix (isolation on shared brokers)."""

    queues: type[QueueSet]
    Plain: type[Job[Any]]
    Retried: type[Job[Any]]
    Urgent: type[Job[Any]]
    Expiring: type[Job[Any]]
    runs: list[tuple[str, JobContext]] = field(default_factory=list)


def make_kit() -> Kit:
    prefix = f"c{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        plain = Queue(prefetch=4)
        retried = Queue(prefetch=4, retry=RetryPolicy.fixed(3, "50ms"))
        urgent = Queue(prefetch=1, max_priority=10)
        expiring = Queue(prefetch=1, message_ttl="300ms")

    class Plain(Job[Queues], queue=Queues.plain, name=f"{prefix}.Plain"):
        n: int = 0
        fail: str = ""

    class Retried(Job[Queues], queue=Queues.retried, name=f"{prefix}.Retried"):
        fail_until: int = 0

    class Urgent(Job[Queues], queue=Queues.urgent, name=f"{prefix}.Urgent"):
        label: str

    class Expiring(Job[Queues], queue=Queues.expiring, name=f"{prefix}.Expiring"):
        n: int = 0

    return Kit(Queues, Plain, Retried, Urgent, Expiring)


def finished(worker: Worker[Any]) -> int:
    return sum(s.succeeded + s.dead for s in worker.stats.values())


async def test_ack(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend, queues=[kit.queues.plain])  # type: ignore[attr-defined]
    seen: list[int] = []

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        seen.append(job.n)

    job_id = await producer.enqueue(kit.Plain(n=7))
    await run_until(worker, lambda: finished(worker) == 1)
    assert seen == [7]
    queue = kit.Plain.job_queue().name
    assert worker.stats[queue].succeeded == 1
    assert await backend.count_pending(queue) == 0
    assert uuid.UUID(job_id)


async def test_retry_with_backoff_then_success(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)
    attempts: list[tuple[str, int, float]] = []

    @worker.handler(kit.Retried)
    async def handle(job: Any, ctx: JobContext) -> None:
        attempts.append((ctx.job_id, ctx.attempt, time.monotonic()))
        if ctx.attempt <= job.fail_until:
            raise Retry("not yet")

    job_id = await producer.enqueue(kit.Retried(fail_until=2))
    await run_until(worker, lambda: finished(worker) == 1)
    assert [a[1] for a in attempts] == [1, 2, 3]
    assert {a[0] for a in attempts} == {job_id}
    assert attempts[1][2] - attempts[0][2] >= 0.045
    stats = worker.stats[kit.Retried.job_queue().name]
    assert (stats.retried, stats.succeeded, stats.dead) == (2, 1, 0)


async def test_retries_exhausted_dead_letter_with_reason(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)

    @worker.handler(kit.Retried)
    async def handle(job: Any, ctx: JobContext) -> None:
        raise ValueError(f"boom {ctx.attempt}")

    await producer.enqueue(kit.Retried())
    await run_until(worker, lambda: finished(worker) == 1)
    queue = kit.Retried.job_queue().name
    reason = "max attempts (3) exhausted after attempt 3: boom 3"
    assert [r for _, r in worker.dead_letters] == [reason]
    dead = await backend.list_dead(queue)
    assert [(e.attempt, r) for e, r in dead] == [(3, reason)]


async def test_fatal_dead_letters_at_once(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)
    runs: list[int] = []

    @worker.handler(kit.Retried)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append(ctx.attempt)
        raise Fatal("no such mailbox")

    await producer.enqueue(kit.Retried())
    await run_until(worker, lambda: finished(worker) == 1)
    assert runs == [1]
    dead = await backend.list_dead(kit.Retried.job_queue().name)
    assert [r for _, r in dead] == ["fatal error: no such mailbox"]


async def test_handler_exception_is_retryable(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        raise KeyError("missing")

    await producer.enqueue(kit.Plain())
    await run_until(worker, lambda: finished(worker) == 1)
    ((_, reason),) = worker.dead_letters
    assert reason == "max attempts (1) exhausted after attempt 1: 'missing'"


async def test_defer_keeps_attempt_and_comes_back_at_top_priority(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)
    seen: list[tuple[str, int, int, int]] = []

    @worker.handler(kit.Urgent)
    async def handle(job: Any, ctx: JobContext) -> None:
        seen.append((job.label, ctx.attempt, ctx.deferrals, ctx.priority))
        if ctx.deferrals == 0:
            raise Defer("100ms", "rate limited")

    await producer.enqueue(kit.Urgent(label="a"))
    await run_until(worker, lambda: finished(worker) == 1)
    assert seen == [("a", 1, 0, 0), ("a", 1, 1, 10)]
    assert worker.stats[kit.Urgent.job_queue().name].deferred == 1


async def test_deferred_job_overtakes_the_backlog(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    for i in range(5):
        await producer.enqueue(kit.Urgent(label=f"backlog-{i}"))
    await producer.defer(kit.Urgent(label="deferred"), "100ms")
    await asyncio.sleep(1.5 if backend.__class__.__name__ == "RabbitMqBackend" else 0.3)
    worker = Worker(kit.queues, backend, concurrency=1)
    order: list[tuple[str, int]] = []

    @worker.handler(kit.Urgent)
    async def handle(job: Any, ctx: JobContext) -> None:
        order.append((job.label, ctx.priority))

    await run_until(worker, lambda: finished(worker) == 6)
    assert order[0] == ("deferred", 10)
    assert [label for label, _ in order[1:]] == [f"backlog-{i}" for i in range(5)]


async def test_enqueue_after_waits(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)
    started = time.monotonic()
    ran_at: list[float] = []

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        ran_at.append(time.monotonic() - started)

    await producer.enqueue_after(kit.Plain(), "400ms")
    assert await backend.count_pending(kit.Plain.job_queue().name) == 0
    await run_until(worker, lambda: finished(worker) == 1)
    assert ran_at[0] >= 0.39


@pytest.mark.parametrize("style", ["async", "sync"])
async def test_job_timeout_is_retryable(backend: Backend, style: str) -> None:
    """An async handler is cancelled at its timeout; a plain one cannot be, so its timeout is
    recorded once its thread has ended (the job is never handed on while it still runs)."""
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    settled: list[float] = []
    worker = Worker(
        kit.queues,
        backend,
        job_timeout="200ms",
        shutdown_grace="1s",
        on_settled=lambda envelope, kind, text: settled.append(time.monotonic()),
    )
    release = threading.Event()
    ended: list[float] = []

    if style == "async":

        @worker.handler(kit.Plain)
        async def slow(job: Any, ctx: JobContext) -> None:
            await asyncio.sleep(10)
    else:

        @worker.handler(kit.Plain)
        def slow_sync(job: Any, ctx: JobContext) -> None:
            release.wait(10)
            ended.append(time.monotonic())

        asyncio.get_running_loop().call_later(0.8, release.set)

    await producer.enqueue(kit.Plain())
    began = time.monotonic()
    await run_until(worker, lambda: finished(worker) == 1)
    release.set()
    assert time.monotonic() - began < 5
    ((_, reason),) = worker.dead_letters
    assert reason == "max attempts (1) exhausted after attempt 1: job timed out after 0.2s"
    if style == "sync":
        assert ended and ended[0] <= settled[0], "recorded only once the thread ended"


async def test_sync_handler_runs_off_the_event_loop(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)
    threads: list[str] = []

    @worker.handler(kit.Plain)
    def handle(job: Any, ctx: JobContext) -> None:
        threads.append(threading.current_thread().name)

    await producer.enqueue(kit.Plain())
    await run_until(worker, lambda: finished(worker) == 1)
    assert threads and threads[0] != threading.main_thread().name


async def test_a_bad_payload_is_dead_lettered_and_an_unhandled_type_is_left_alone(
    backend: Backend,
) -> None:
    """A worker claims only the job types it has handlers for where the transport can filter
    (memory, PostgreSQL): another type stays pending for a worker that has its handler.
    RabbitMQ hands every message to the queue's consumers: there it is dead-lettered."""
    kit = make_kit()
    await Producer.create(kit.queues, backend)
    queue = kit.Plain.job_queue().name
    worker = Worker(kit.queues, backend, queues=[kit.queues.plain])  # type: ignore[attr-defined]

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        raise AssertionError("must not run")

    await backend.publish([Envelope.new("nobody.Knows", queue, {})])
    await backend.publish([Envelope.new(kit.Plain.job_name(), queue, {"n": "not a number"})])
    filters = backend.__class__.__name__ != "RabbitMqBackend"
    await run_until(worker, lambda: finished(worker) == (1 if filters else 2))
    if filters:
        await asyncio.sleep(0.3)  # a claim of the other type would have happened by now
    reasons = sorted(r for _, r in await backend.list_dead(queue))
    assert reasons[0].startswith("decode error:")
    if filters:
        assert reasons[1:] == []
        assert await backend.count_pending(queue) == 1
    else:
        assert reasons[1] == "no handler for job type `nobody.Knows`"


async def test_message_ttl_expires_into_dead_letters(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    await producer.enqueue(kit.Expiring(n=1))
    await asyncio.sleep(0.6)
    worker = Worker(kit.queues, backend)
    ran: list[int] = []

    @worker.handler(kit.Expiring)
    async def handle(job: Any, ctx: JobContext) -> None:
        ran.append(job.n)

    queue = kit.Expiring.job_queue().name
    await producer.enqueue(kit.Expiring(n=2))
    await run_until(worker, lambda: ran == [2])
    async with asyncio.timeout(10):
        while not (dead := await backend.list_dead(queue)):
            await asyncio.sleep(0.05)
    assert [(e.payload["n"], r) for e, r in dead] == [(1, "expired")]


async def test_graceful_shutdown_finishes_what_was_pulled(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend, queues=[kit.queues.plain], concurrency=2)  # type: ignore[attr-defined]
    started: list[int] = []
    completed: list[int] = []

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        started.append(job.n)
        await asyncio.sleep(0.3)
        completed.append(job.n)

    await producer.enqueue_many([kit.Plain(n=i) for i in range(10)])
    await run_until(worker, lambda: len(started) >= 2)
    queue = kit.Plain.job_queue().name
    assert sorted(started) == sorted(completed)
    assert worker.stats[queue].succeeded == len(completed)
    assert await backend.count_pending(queue) == 10 - len(completed)


async def test_rolled_back_transactional_enqueue_leaves_nothing(backend: Backend) -> None:
    if not backend.supports_transactions:
        pytest.skip("this backend has no caller transactions")
    import psycopg

    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    url = backend.conninfo  # type: ignore[attr-defined]
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await producer.enqueue(kit.Plain(n=1), connection=conn)
        await conn.rollback()
        await producer.enqueue(kit.Plain(n=2), connection=conn)
        await conn.commit()
    queue = kit.Plain.job_queue().name
    assert await backend.count_pending(queue) == 1


async def test_payload_round_trips_exactly(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)
    text = 'nul\x00 quote" backslash\\ emoji \U0001f600 ' + "é" * 1000
    seen: list[str] = []

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        seen.append(job.fail)

    await producer.enqueue(kit.Plain(fail=text))
    await run_until(worker, lambda: finished(worker) == 1)
    assert seen == [text]


async def test_each_outcome_is_logged_with_structured_fields(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="queuey.worker")
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)

    @worker.handler(kit.Retried)
    async def handle(job: Any, ctx: JobContext) -> None:
        if ctx.attempt == 1:
            raise Retry("once")
        if job.fail_until:
            raise Fatal("no")

    ok_id = await producer.enqueue(kit.Retried())
    await producer.enqueue(kit.Retried(fail_until=1))
    await run_until(worker, lambda: finished(worker) == 2)
    records = [r for r in caplog.records if r.name == "queuey.worker" and hasattr(r, "job_id")]
    levels = sorted((r.levelname, r.attempt) for r in records)  # type: ignore[attr-defined]
    assert levels == [("ERROR", 2), ("INFO", 2), ("WARNING", 1), ("WARNING", 1)]
    for record in records:
        assert record.queue == kit.Retried.job_queue().name  # type: ignore[attr-defined]
        assert record.job_type == kit.Retried.job_name()  # type: ignore[attr-defined]
    assert ok_id in {r.job_id for r in records}


async def test_forced_shutdown_hands_running_jobs_back(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend, queues=[kit.queues.plain])  # type: ignore[attr-defined]
    started: list[int] = []

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        started.append(job.n)
        await asyncio.sleep(60)

    await producer.enqueue_many([kit.Plain(n=i) for i in range(2)])
    task = asyncio.create_task(worker.run())
    async with asyncio.timeout(10):
        while len(started) < 2:
            await asyncio.sleep(0.01)
    worker.shutdown()
    await asyncio.sleep(0.1)
    assert not task.done(), "a graceful shutdown waits for running jobs"
    worker.shutdown(force=True)
    await asyncio.wait_for(task, 10)
    assert await backend.count_pending(kit.Plain.job_queue().name) == 2


class _AsyncCallable:
    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    async def __call__(self, job: Any, ctx: JobContext) -> None:
        await asyncio.sleep(0)
        self.seen.append("callable")


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


async def test_awaitables_from_any_handler_shape_are_awaited(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)
    seen: list[str] = []

    async def body(label: str) -> None:
        seen.append(label)

    worker.register(kit.Plain, _AsyncCallable(seen))
    worker.register(kit.Retried, lambda job, ctx: body("lambda"))
    await producer.enqueue(kit.Plain())
    await producer.enqueue(kit.Retried())
    await run_until(worker, lambda: finished(worker) == 2)
    assert sorted(seen) == ["callable", "lambda"]


async def test_an_exception_without_text_is_recorded_by_its_type(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        raise _Unprintable()

    await producer.enqueue(kit.Plain())
    await run_until(worker, lambda: finished(worker) == 1)
    ((_, reason),) = worker.dead_letters
    assert reason == "max attempts (1) exhausted after attempt 1: _Unprintable"


@pytest.mark.parametrize("raised", [asyncio.CancelledError, SystemExit, KeyboardInterrupt])
async def test_a_handler_raising_a_base_exception_fails_only_its_job(
    backend: Backend, raised: type[BaseException]
) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend, queues=[kit.queues.plain])  # type: ignore[attr-defined]
    runs: list[int] = []

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append(job.n)
        if job.n == 1:
            raise raised()
        await asyncio.sleep(0.05)

    await producer.enqueue_many([kit.Plain(n=n) for n in range(4)])
    await run_until(worker, lambda: finished(worker) == 4)
    assert sorted(runs) == [0, 1, 2, 3], "the failing job ran once and the others all ran"
    ((env, reason),) = await backend.list_dead(kit.Plain.job_queue().name)
    assert env.payload["n"] == 1
    assert reason == f"max attempts (1) exhausted after attempt 1: {raised.__name__}"


@pytest.mark.parametrize("text", ["nul\x00byte", "lone \ud800 surrogate", "x" * 10_000])
async def test_any_error_text_is_recorded(backend: Backend, text: str) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend)

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        raise Fatal(text)

    await producer.enqueue(kit.Plain())
    await run_until(worker, lambda: finished(worker) == 1)
    assert worker.settle_failures == 0
    ((_, reason),) = await backend.list_dead(kit.Plain.job_queue().name)
    assert reason.startswith("fatal error: ") and "\x00" not in reason
    assert len(reason.encode()) <= 4003
    reason.encode()  # storable: no lone surrogate left
