"""The runner on its own: one delivery through the middleware chain, the settle and the hooks,
with a recording delivery (no backend)."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

import pytest

from queuey import ConfigError, Defer, Envelope, Fatal, JobContext, Retry
from queuey._outcome import DeadLetter, Outcome
from queuey._runtime.faces.job import JobFace
from queuey._runtime.middleware import CallNext, Chain, Middleware, OutcomeLog
from queuey._runtime.runner import Process, Runner
from queuey.backends.base import Delivery
from tests.unit.runtime._kit import Events, FakeDelivery, Recorder, RunQueues, Step


async def handle(job: Step, ctx: JobContext) -> None:
    if job.action == "retry":
        raise Retry("again")
    if job.action == "defer":
        raise Defer("1s")
    if job.action == "fatal":
        raise Fatal("no")
    if job.action == "block":
        await asyncio.sleep(3600)


def bound(*middleware: Middleware) -> tuple[Runner, Process]:
    face = JobFace(RunQueues, None)
    face.register(Step, handle)
    runner = Runner(face, [OutcomeLog(face), *middleware])
    return runner, runner.bind(RunQueues.work.config, ThreadPoolExecutor(1))


def delivery(action: str = "ok", *, fail: bool = False) -> FakeDelivery:
    envelope = Envelope.new(Step.job_name(), RunQueues.work.name, {"action": action})
    return FakeDelivery(envelope, fail=fail)


class Boom(Middleware):
    """Raises from the hooks named in ``where``."""

    def __init__(self, *where: str) -> None:
        self.where = where

    async def around_call(self, delivery: Delivery, call_next: CallNext) -> Outcome:
        if "around_call" in self.where:
            raise RuntimeError("boom around")
        return await call_next(delivery)

    def on_outcome(self, delivery: Delivery, outcome: Outcome) -> None:
        if "on_outcome" in self.where:
            raise RuntimeError("boom after")

    def on_settle_failure(self, delivery: Delivery, outcome: Outcome, error: Exception) -> None:
        if "on_settle_failure" in self.where:
            raise RuntimeError("boom on failure")


async def test_hooks_run_in_chain_order() -> None:
    events: Events = []
    _, process = bound(Recorder("a", events), Recorder("b", events))
    target = delivery()
    await process(target)
    assert target.calls == ["ack"]
    assert events == [
        ("a", "before"),
        ("b", "before"),
        ("b", "after", "succeeded"),
        ("a", "after", "succeeded"),
        ("a", "on_outcome", "succeeded"),
        ("b", "on_outcome", "succeeded"),
    ]


@pytest.mark.parametrize(
    ("action", "kind", "settled"),
    [
        ("ok", "succeeded", "ack"),
        ("retry", "retried", "retry"),
        ("defer", "deferred", "defer"),
        ("fatal", "dead", "dead_letter: fatal error: no"),
    ],
)
async def test_every_middleware_sees_the_final_outcome(
    action: str, kind: str, settled: str
) -> None:
    events: Events = []
    _, process = bound(Recorder("a", events), Recorder("b", events))
    target = delivery(action)
    await process(target)
    assert target.calls == [settled]
    assert [e for e in events if e[1] == "on_outcome"] == [
        ("a", "on_outcome", kind),
        ("b", "on_outcome", kind),
    ]


async def test_a_settle_failure_is_counted_once_and_shown_to_every_middleware(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: Events = []
    runner, process = bound(Recorder("a", events), Recorder("b", events))
    target = delivery(fail=True)
    await process(target)
    assert runner.settle_failures == 1
    assert [e for e in events if e[1].startswith("on_")] == [
        ("a", "on_settle_failure", "succeeded", "the link is down"),
        ("b", "on_settle_failure", "succeeded", "the link is down"),
    ]
    (record,) = [r for r in caplog.records if r.name == "queuey.worker"]
    assert record.levelno == logging.ERROR
    envelope = target.envelope
    assert record.getMessage() == (
        f"could not record the outcome (job {envelope.job_type} {envelope.job_id} "
        f"({envelope.queue}, attempt 1) succeeded): the link is down"
    )
    assert record.job_id == target.envelope.job_id  # type: ignore[attr-defined]


async def test_a_raising_outcome_hook_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: Events = []
    runner, process = bound(Boom("on_outcome"), Recorder("a", events))
    target = delivery()
    await process(target)
    assert target.calls == ["ack"] and runner.settle_failures == 0
    assert ("a", "on_outcome", "succeeded") in events
    (record,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage() == "middleware Boom failed in on_outcome"
    assert record.exc_info is not None and record.job_type == Step.job_name()  # type: ignore[attr-defined]


async def test_a_raising_settle_failure_hook_is_logged_and_counted_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: Events = []
    runner, process = bound(Boom("on_settle_failure"), Recorder("a", events))
    await process(delivery(fail=True))
    assert runner.settle_failures == 1
    assert ("a", "on_settle_failure", "succeeded", "the link is down") in events
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "middleware Boom failed in on_settle_failure" in messages


async def test_a_middleware_raising_around_the_call_fails_the_run_visibly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: Events = []
    _, process = bound(Recorder("a", events), Boom("around_call"))
    target = delivery()
    await process(target)
    assert target.calls == ["retry"], "decided like a handler failure: the policy retries it"
    assert events[-2:] == [("a", "after", "retried"), ("a", "on_outcome", "retried")]
    (crash,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert crash.getMessage() == "middleware Boom failed in around_call"
    assert crash.exc_info is not None


async def test_around_call_may_replace_the_outcome() -> None:
    class Veto(Middleware):
        async def around_call(self, delivery: Delivery, call_next: CallNext) -> Outcome:
            await call_next(delivery)
            return DeadLetter("vetoed")

    _, process = bound(Veto())
    target = delivery()
    await process(target)
    assert target.calls == ["dead_letter: vetoed"]


async def test_a_cancelled_run_releases_the_delivery_and_tells_no_hook() -> None:
    events: Events = []
    _, process = bound(Recorder("a", events))
    target = delivery("block")
    task = asyncio.create_task(process(target))
    while not events:
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert target.calls == ["release"]
    assert events == [("a", "before")]


def test_a_chain_with_no_around_hook_calls_the_run_directly() -> None:
    face = JobFace(RunQueues, None)

    async def call(delivery: Delivery) -> Outcome:
        raise AssertionError

    chain = Chain([OutcomeLog(face), Middleware()], face)
    assert chain.wrap(call, lambda delivery, error: DeadLetter("")) is call


def test_a_member_must_be_a_middleware_with_known_hooks() -> None:
    face = JobFace(RunQueues, None)

    class Typo(Middleware):
        def on_outcomes(self, delivery: Delivery, outcome: Outcome) -> None: ...

    with pytest.raises(ConfigError, match="not a queuey Middleware"):
        Chain([object()], face)  # type: ignore[list-item]
    with pytest.raises(ConfigError, match=r"Typo\.on_outcomes is not a hook"):
        Chain([Typo()], face)


class SlowAck(FakeDelivery):
    """A delivery whose ack lands only when ``landed`` is set (a batched ack in flight)."""

    def __init__(self, envelope: Envelope, landed: asyncio.Event) -> None:
        super().__init__(envelope)
        self.landed = landed

    async def ack(self, result: str | None = None) -> None:
        self.calls.append("ack sent")
        await self.landed.wait()
        self.calls.append("ack landed")


class ListConsumer:
    """Hands out ``deliveries`` one by one, then waits until stopped."""

    def __init__(self, deliveries: list[FakeDelivery]) -> None:
        self.deliveries = deliveries
        self.stopped = asyncio.Event()

    async def next(self) -> Delivery | None:
        if self.deliveries:
            return self.deliveries.pop(0)
        await self.stopped.wait()
        return None

    async def stop(self) -> None:
        self.stopped.set()


async def test_a_handler_slot_is_free_while_the_outcome_before_it_is_being_recorded() -> None:
    """With one slot, the second job starts while the first one's ack is still in flight: the
    slot is held by the handler, not by the settle after it (which would keep a database
    worker from claiming while its acks are on the wire)."""
    from queuey._runtime.loop import ConsumeLoop

    landed = asyncio.Event()
    started: list[str] = []

    async def record(job: Step, ctx: JobContext) -> None:
        started.append(job.action)

    face = JobFace(RunQueues, None)
    face.register(Step, record)
    runner = Runner(face, [])
    first, second = (
        SlowAck(Envelope.new(Step.job_name(), RunQueues.work.name, {"action": name}), landed)
        for name in ("first", "second")
    )
    consumer = ListConsumer([first, second])

    class Backend:
        def consumer(self, config: object) -> ListConsumer:
            return consumer

    loop = ConsumeLoop(Backend(), [RunQueues.work.config], runner.bind, concurrency=1)  # type: ignore[arg-type]
    running = asyncio.create_task(loop.run())
    for _ in range(100):
        if started == ["first", "second"]:
            break
        await asyncio.sleep(0.01)
    assert started == ["first", "second"]
    assert first.calls == ["ack sent"]  # the first ack had not landed when the second began
    landed.set()
    loop.shutdown()
    await asyncio.wait_for(running, 5)
    assert first.calls == second.calls == ["ack sent", "ack landed"]
