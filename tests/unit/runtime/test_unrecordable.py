"""The runner on an outcome the backend refuses for good (its settle raises a ``ValueError``):
a dead letter saying which outcome could not be recorded and why is recorded instead, both shown
to the middleware and the refusal counted; a transient failure (a plain ``BackendError``) is
only counted, as before; a refused dead letter is not followed by anything else. And a run
cancelled while its plain handler's thread still runs is never handed back."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from queuey import BackendError, Envelope, JobContext, Retry
from queuey._outcome import Ack, DeadLetter, DeferFor, RetryAfter
from queuey._runtime.faces.job import JobFace
from queuey._runtime.middleware import OutcomeLog
from queuey._runtime.runner import Runner
from queuey._runtime.settle import refused, unrecordable
from tests.unit.runtime._kit import Events, FakeDelivery, Recorder, RunQueues, Step


class Refused(BackendError, ValueError):
    """What a backend raises for an outcome it refuses for good."""


class RefusingDelivery(FakeDelivery):
    """Refuses the settles named in ``refuse``; fails the others when ``fail``."""

    def __init__(self, envelope: Envelope, refuse: Collection[str], fail: bool = False) -> None:
        super().__init__(envelope, fail=fail)
        self.refuse = refuse

    def _settle(self, name: str) -> None:
        self.calls.append(name)
        if name.split(":")[0] in self.refuse:
            raise Refused("PostgreSQL: timestamp out of range")
        if self.fail:
            raise BackendError("the link is down")


async def handle(job: Step, ctx: JobContext) -> None:
    if job.action == "retry":
        raise Retry("again")


def runner_with(events: Events) -> Runner:
    face = JobFace(RunQueues, None)
    face.register(Step, handle)
    return Runner(face, [OutcomeLog(face), Recorder("a", events)])


def envelope(action: str) -> Envelope:
    return Envelope.new(Step.job_name(), RunQueues.work.name, {"action": action})


async def test_a_refused_retry_is_dead_lettered_with_the_reason() -> None:
    events: Events = []
    runner = runner_with(events)
    target = RefusingDelivery(envelope("retry"), refuse={"retry"})
    await runner.bind(RunQueues.work.config, ThreadPoolExecutor(1))(target)
    reason = "could not record the retry in 1s: PostgreSQL: timestamp out of range"
    reason += " (the outcome's reason: again)"
    assert target.calls == ["retry", f"dead_letter: {reason}"]
    assert runner.settle_failures == 1
    assert [e for e in events if e[1].startswith("on_")] == [
        ("a", "on_settle_failure", "retried", "PostgreSQL: timestamp out of range"),
        ("a", "on_outcome", "dead"),
    ]


async def test_a_transient_failure_is_only_counted() -> None:
    events: Events = []
    runner = runner_with(events)
    target = RefusingDelivery(envelope("retry"), refuse=(), fail=True)
    await runner.bind(RunQueues.work.config, ThreadPoolExecutor(1))(target)
    assert target.calls == ["retry"]
    assert runner.settle_failures == 1


async def test_a_refused_fallback_is_counted_and_nothing_more_is_tried() -> None:
    events: Events = []
    runner = runner_with(events)
    target = RefusingDelivery(envelope("retry"), refuse={"retry", "dead_letter"})
    await runner.bind(RunQueues.work.config, ThreadPoolExecutor(1))(target)
    assert [call.split(":")[0] for call in target.calls] == ["retry", "dead_letter"]
    assert runner.settle_failures == 2
    assert [e[1:3] for e in events if e[1].startswith("on_")] == [
        ("on_settle_failure", "retried"),
        ("on_settle_failure", "dead"),
    ]


@pytest.mark.parametrize(
    ("outcome", "text"),
    [
        (Ack(), "could not record the success: no"),
        (
            DeferFor(envelope("x"), timedelta(days=2), "busy"),
            "could not record the deferral for 172800s: no (the outcome's reason: busy)",
        ),
        (
            RetryAfter(envelope("x"), timedelta(seconds=0.5), "boom"),
            "could not record the retry in 0.5s: no (the outcome's reason: boom)",
        ),
        (DeadLetter("bad"), "could not record the dead letter: no (the outcome's reason: bad)"),
    ],
)
def test_the_reason_names_the_outcome_that_could_not_be_recorded(
    outcome: Ack | DeferFor | RetryAfter | DeadLetter, text: str
) -> None:
    assert unrecordable(outcome, Refused("no")) == DeadLetter(text)


def test_only_a_value_error_is_a_refusal() -> None:
    assert refused(Refused("x"))
    assert not refused(BackendError("the link is down"))
    assert not refused(ConnectionError())


async def test_a_run_cancelled_while_its_thread_runs_is_not_handed_back() -> None:
    face = JobFace(RunQueues, None)
    started, release = threading.Event(), threading.Event()

    def blocking(job: Step, ctx: JobContext) -> None:
        started.set()
        release.wait(5)

    face.register(Step, blocking)
    runner = Runner(face, [OutcomeLog(face)])
    target = FakeDelivery(envelope("ok"))
    task = asyncio.create_task(runner.bind(RunQueues.work.config, ThreadPoolExecutor(1))(target))
    await asyncio.to_thread(started.wait, 5)
    assert runner.in_thread(target)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    assert target.calls == []
