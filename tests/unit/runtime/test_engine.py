"""Both faces on one engine (``MemoryBackend``): the middleware chain of ``Worker`` and
``Subscriber``, outcome counting per kind, settle failures, and the shared option checks."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from queuey import (
    ConfigError,
    Defer,
    Fatal,
    JobContext,
    MemoryBackend,
    Producer,
    QueueConfig,
    QueueStats,
    Retry,
    Worker,
)
from queuey._outcome import (
    Ack,
    DeadLetter,
    DeferFor,
    Outcome,
    OutcomeKind,
    RetryAfter,
    after_failure,
    spent_attempts,
)
from queuey._runtime.cancellation import Cancellation
from queuey._runtime.middleware import CallNext, Middleware, OutcomeLog, SettledCallback
from queuey._runtime.stats import Stats
from queuey.backends.base import Consumer, Delivery
from queuey.envelope import Envelope
from queuey.retry import RetryPolicy
from queuey.testing import run_until_idle
from queuey.topics import App, MessageContext, QueuesConfig, Subscriber
from tests.helpers import run_until
from tests.unit.runtime._kit import Events, FakeDelivery, Recorder, RunQueues, Step


def steps_worker(backend: MemoryBackend, **options: Any) -> Worker[RunQueues]:
    worker = Worker(RunQueues, backend, **options)

    @worker.handler(Step)
    async def handle(job: Step, ctx: JobContext) -> None:
        if job.action == "retry" and ctx.attempt == 1:
            raise Retry("once")
        if job.action == "defer" and ctx.deferrals == 0:
            raise Defer("5s")
        if job.action == "fatal":
            raise Fatal("no")

    return worker


async def enqueue(backend: MemoryBackend, *actions: str) -> None:
    producer = await Producer.create(RunQueues, backend)
    await producer.enqueue_many([Step(action=action) for action in actions])


@pytest.mark.looptime
async def test_a_worker_counts_each_outcome_kind_and_keeps_dead_letters() -> None:
    backend = MemoryBackend()
    worker = steps_worker(backend)
    await enqueue(backend, "ok", "retry", "defer", "fatal")
    await run_until_idle(worker, backend)
    stats = worker.stats[RunQueues.work.name]
    assert stats == QueueStats(succeeded=3, retried=1, deferred=1, dead=1)
    assert stats.acked == 5
    ((envelope, reason),) = worker.dead_letters
    assert (envelope.payload, reason) == ({"action": "fatal"}, "fatal error: no")
    assert worker.settle_failures == 0


def test_queue_stats_count_one_field_per_kind() -> None:
    stats = QueueStats()
    for kind in OutcomeKind:
        stats.count(kind)
    stats.count(OutcomeKind.DEAD)
    assert stats == QueueStats(
        succeeded=1, retried=1, deferred=1, dead=2, cancelled=1, lease_lost=1
    )
    assert {kind.value for kind in OutcomeKind} == {
        "succeeded",
        "retried",
        "deferred",
        "dead",
        "cancelled",
        "lease_lost",
    }


async def test_stats_count_a_queue_first_seen_at_run_time() -> None:
    stats = Stats(["known"])
    envelope = Envelope.new("t", "elsewhere", {})
    stats.on_outcome(FakeDelivery(envelope), Ack())
    stats.on_outcome(FakeDelivery(envelope), DeadLetter("gone"))
    assert stats.queues["elsewhere"] == QueueStats(succeeded=1, dead=1)
    assert stats.queues["known"] == QueueStats()
    assert list(stats.dead_letters) == [(envelope, "gone")]


@pytest.mark.looptime
async def test_worker_middleware_runs_after_the_built_in_members_in_order() -> None:
    backend = MemoryBackend()
    events: Events = []
    settled: list[tuple[str, str]] = []
    first, second = Recorder("first", events), Recorder("second", events)
    worker = steps_worker(
        backend,
        on_settled=lambda envelope, kind, text: settled.append((kind, text)),
        middleware=[first, second],
    )
    kinds = [type(member) for member in worker.middleware]
    assert kinds[:4] == [OutcomeLog, Stats, Cancellation, SettledCallback]
    assert worker.middleware[4:] == (first, second)
    await enqueue(backend, "fatal")
    await run_until_idle(worker, backend)
    assert settled == [("dead", "fatal error: no")]
    assert events == [
        ("first", "before"),
        ("second", "before"),
        ("second", "after", "dead"),
        ("first", "after", "dead"),
        ("first", "on_outcome", "dead"),
        ("second", "on_outcome", "dead"),
    ]


@pytest.mark.looptime
async def test_a_raising_middleware_is_logged_and_the_job_still_settles(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(Middleware):
        def on_outcome(self, delivery: Delivery, outcome: Outcome) -> None:
            raise RuntimeError("broken exporter")

    backend = MemoryBackend()
    events: Events = []
    worker = steps_worker(backend, middleware=[Broken(), Recorder("after", events)])
    await enqueue(backend, "ok")
    await run_until_idle(worker, backend)
    assert len(backend.acked(RunQueues.work.name)) == 1
    assert worker.stats[RunQueues.work.name].succeeded == 1
    assert events[-1] == ("after", "on_outcome", "succeeded")
    (record,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert (record.name, record.getMessage()) == (
        "queuey.worker",
        "middleware Broken failed in on_outcome",
    )
    assert record.exc_info is not None


@pytest.mark.looptime
async def test_a_raising_on_settled_callback_keeps_its_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def explode(envelope: Envelope, kind: str, text: str) -> None:
        raise RuntimeError("metrics down")

    backend = MemoryBackend()
    worker = steps_worker(backend, on_settled=explode)
    await enqueue(backend, "ok")
    await run_until_idle(worker, backend)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        "on_settled callback failed"
    ]
    assert worker.stats[RunQueues.work.name].succeeded == 1


class _FailingAcks:
    """A backend whose deliveries' ``ack`` raises ``BackendError`` (the rest is memory's)."""

    def __init__(self, backend: MemoryBackend) -> None:
        self.backend = backend
        self.supports_transactions = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    async def declare(self, queues: Sequence[QueueConfig]) -> None:
        await self.backend.declare(queues)

    def consumer(self, queue: QueueConfig) -> Consumer:
        return _FailingConsumer(self.backend.consumer(queue))


class _FailingConsumer:
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    async def next(self) -> Delivery | None:
        delivery = await self.consumer.next()
        if delivery is None:
            return None
        failing = FakeDelivery(delivery.envelope, fail=True)
        failing.release = delivery.release  # type: ignore[method-assign]
        return failing

    async def stop(self) -> None:
        await self.consumer.stop()


async def test_a_settle_failure_is_counted_once_per_delivery_and_shown_to_middleware() -> None:
    backend = MemoryBackend()
    events: Events = []
    worker = steps_worker(_FailingAcks(backend), middleware=[Recorder("m", events)])  # type: ignore[arg-type]
    await enqueue(backend, "ok", "ok")
    await run_until(worker, lambda: worker.settle_failures == 2)
    assert worker.settle_failures == 2
    failures = [e for e in events if e[1] == "on_settle_failure"]
    assert failures == [("m", "on_settle_failure", "succeeded", "the link is down")] * 2
    assert not [e for e in events if e[1] == "on_outcome"]
    assert worker.stats[RunQueues.work.name] == QueueStats()
    with pytest.raises(AttributeError):
        worker.settle_failures = 0  # type: ignore[misc]


@pytest.mark.looptime
async def test_a_subscriber_runs_the_same_chain_with_topic_outcomes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(max_attempts=2, retry_backoff_secs=1, subscribe={"t": "flaky"}))

    @app.function
    async def flaky(payload: Any, context: MessageContext) -> None:
        if context.attempts == 1:
            raise ValueError("first time")

    events: Events = []
    subscriber = Subscriber(app.config, app.functions, backend, middleware=[Recorder("m", events)])
    assert [type(m) for m in subscriber.middleware][:2] == [OutcomeLog, Stats]
    await app.publisher(backend).publish("t", {})
    caplog.set_level(logging.INFO, logger="queuey.topics")
    await run_until_idle(subscriber, backend)
    assert [e for e in events if e[1] == "on_outcome"] == [
        ("m", "on_outcome", "retried"),
        ("m", "on_outcome", "succeeded"),
    ]
    assert subscriber.stats["t"] == QueueStats(succeeded=1, retried=1)
    messages = [r.getMessage() for r in caplog.records if r.name == "queuey.topics"]
    (message_id,) = {e.job_id for e in backend.acked("t", "topic")}
    assert [m for m in messages if m.startswith("message ")] == [
        f"message {message_id} on t for flaky (attempt 1) failed; will retry in 1s: "
        "ValueError: first time",
        f"message {message_id} on t for flaky (attempt 2) handled",
    ]
    with pytest.raises(AttributeError):
        subscriber.settle_failures = 0  # type: ignore[misc]


@pytest.mark.looptime
async def test_a_middleware_raising_around_a_topic_call_fails_the_message_like_its_function(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Refuse(Middleware):
        async def around_call(self, delivery: Delivery, call_next: CallNext) -> Outcome:
            raise PermissionError("not today")

    backend = MemoryBackend()
    app = App(QueuesConfig(max_attempts=2, retry_backoff_secs=1, subscribe={"t": "f"}))
    ran: list[int] = []
    app.register("f", lambda payload: ran.append(1))
    subscriber = Subscriber(app.config, app.functions, backend, middleware=[Refuse()])
    await app.publisher(backend).publish("t", {})
    await run_until_idle(subscriber, backend)
    assert ran == []
    ((envelope, reason),) = backend.dead_letters("t", "topic")
    assert (envelope.attempt, reason) == (2, "PermissionError: not today")
    crashes = [
        r for r in caplog.records if r.getMessage() == "middleware Refuse failed in around_call"
    ]
    assert len(crashes) == 2 and crashes[0].name == "queuey.topics"


@pytest.mark.parametrize("value", [2.5, True, False, 0, -1, "2"])
def test_concurrency_must_be_a_whole_number_on_both_faces(value: object) -> None:
    backend = MemoryBackend()
    with pytest.raises(ConfigError, match="concurrency"):
        Worker(RunQueues, backend, concurrency=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="concurrency"):
        Subscriber(QueuesConfig(), {}, backend, concurrency=value)  # type: ignore[arg-type]


def test_middleware_must_be_middleware_on_both_faces() -> None:
    backend = MemoryBackend()
    with pytest.raises(ConfigError, match="middleware"):
        Worker(RunQueues, backend, middleware=[print])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="middleware"):
        Subscriber(QueuesConfig(), {}, backend, middleware=[object()])  # type: ignore[list-item]


def test_redeliveries_do_not_spend_the_retry_budget() -> None:
    envelope = Envelope.new("t", "q", {}).model_copy(update={"attempt": 3, "redeliveries": 2})
    assert spent_attempts(envelope) == 1
    policy = RetryPolicy.fixed(2, "1s")
    outcome = after_failure(envelope, "x", policy)
    assert isinstance(outcome, RetryAfter) and outcome.envelope.attempt == 4
    spent = envelope.model_copy(update={"redeliveries": 1})
    assert after_failure(
        spent, "x", policy, reason="gave up at {attempt}/{max_attempts}: {text}"
    ) == (DeadLetter("gave up at 3/2: x"))


def test_every_outcome_has_a_kind_and_a_text() -> None:
    envelope = Envelope.new("t", "q", {})
    assert (Ack().kind, Ack().text) == (OutcomeKind.SUCCEEDED, "")
    retry = RetryAfter(envelope, timedelta(seconds=1), "err")
    assert (retry.kind, retry.text) == (OutcomeKind.RETRIED, "err")
    defer = DeferFor(envelope, timedelta(seconds=1), "later")
    assert (defer.kind, defer.text) == (OutcomeKind.DEFERRED, "later")
    assert (DeadLetter("why").kind, DeadLetter("why").text) == (OutcomeKind.DEAD, "why")
