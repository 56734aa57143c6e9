"""What the runtime tests share: a queue set, recording middleware and a delivery whose settle
can be made to fail."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from queuey import BackendError, Envelope, Job, Queue, QueueSet, RetryPolicy
from queuey._outcome import Outcome
from queuey._runtime.middleware import CallNext, Middleware
from queuey.backends.base import Delivery

__all__ = ["Events", "FakeDelivery", "Recorder", "RunQueues", "Step"]

Events = list[tuple[str, ...]]


class RunQueues(QueueSet, prefix="rt"):
    work = Queue(prefetch=4, retry=RetryPolicy.fixed(2, "1s"), max_priority=5)


class Step(Job[RunQueues], queue=RunQueues.work, name="rt.Step"):
    action: str = "ok"


class Recorder(Middleware):
    """Records every hook it sees in ``events`` as ``(name, hook, detail)``."""

    def __init__(self, name: str, events: Events) -> None:
        self.name = name
        self.events = events

    async def around_call(self, delivery: Delivery, call_next: CallNext) -> Outcome:
        self.events.append((self.name, "before"))
        outcome = await call_next(delivery)
        self.events.append((self.name, "after", outcome.kind.value))
        return outcome

    def on_outcome(self, delivery: Delivery, outcome: Outcome) -> None:
        self.events.append((self.name, "on_outcome", outcome.kind.value))

    def on_settle_failure(self, delivery: Delivery, outcome: Outcome, error: Exception) -> None:
        self.events.append((self.name, "on_settle_failure", outcome.kind.value, str(error)))


class FakeDelivery:
    """A ``Delivery`` recording what it was told; ``fail`` makes every settle raise."""

    def __init__(self, envelope: Envelope, *, fail: bool = False) -> None:
        self._envelope = envelope
        self.fail = fail
        self.calls: list[str] = []

    @property
    def envelope(self) -> Envelope:
        return self._envelope

    def _settle(self, name: str) -> None:
        self.calls.append(name)
        if self.fail:
            raise BackendError("the link is down")

    async def ack(self, result: str | None = None) -> None:
        self._settle("ack")

    async def retry(
        self, envelope: Envelope, delay: timedelta, error: str, failure: object = None
    ) -> None:
        self._settle("retry")

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        self._settle("defer")

    async def dead_letter(self, reason: str, failure: object = None) -> None:
        self._settle(f"dead_letter: {reason}")

    async def release(self) -> None:
        self.calls.append("release")

    @property
    def cancel_requested(self) -> asyncio.Future[None] | None:
        return None

    @property
    def lease_lost(self) -> bool:
        return False

    async def cancelled(self) -> None:
        self._settle("cancelled")
