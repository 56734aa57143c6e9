"""``Store``: the memory backend's state and the operations on it, shared by the backend, its
consumers and their deliveries (and by every copy of a backend).

Per queue, keyed by (kind, name): the pending envelopes in delivery order, counters of those
waiting on a timer, and the acknowledged and dead-lettered ones for inspection. Timers run on
the event loop's clock (``loop.call_later``), so a virtual-time loop lets delays pass in no wall
time. Ordering rule: an envelope goes behind every pending envelope of equal or higher priority
and ahead of the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from queuey.backends.base import CancelResult
from queuey.envelope import Envelope, Kind
from queuey.errors import ShutDownError
from queuey.queues import QueueConfig

__all__ = ["Pending", "QueueState", "Store", "Waiting", "now"]

Timer = Literal["held", "delayed"]
"""Which counter an envelope waiting on a timer is in: ``defer`` or a delayed publish."""


def now() -> float:
    """The running event loop's clock (virtual under looptime)."""
    return asyncio.get_running_loop().time()


@dataclass
class Pending:
    """An envelope waiting to be handed out, and when it expires (loop time), if ever."""

    envelope: Envelope
    expires_at: float | None


@dataclass
class QueueState:
    """One queue: its configuration, what waits in it, and what became of what left it."""

    config: QueueConfig
    pending: list[Pending] = field(default_factory=list)
    held: int = 0
    delayed: int = 0
    acked: list[Envelope] = field(default_factory=list)
    dead: list[tuple[Envelope, str]] = field(default_factory=list)
    cancelled: list[Envelope] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Waiting:
    """An envelope waiting on a timer (delayed or held), so that ``cancel`` can stop it."""

    envelope: Envelope
    queue: QueueState
    counter: Timer
    handle: asyncio.TimerHandle | None = None


class Store:
    """Every queue of one memory backend, its timers, and how many deliveries are out."""

    def __init__(self) -> None:
        self.queues: dict[tuple[Kind, str], QueueState] = {}
        self.closed = False
        self._timers: dict[str, Waiting] = {}
        self.running: dict[str, asyncio.Future[None]] = {}  # job id -> its cancel request
        self._in_flight = 0
        self._activity = asyncio.Event()

    def queue(self, name: str, kind: Kind = "job") -> QueueState:
        """Queue ``name`` of ``kind``, created with default settings if never declared."""
        state = self.queues.get((kind, name))
        if state is None:
            state = self.queues[(kind, name)] = QueueState(QueueConfig(name, kind=kind))
        return state

    def declare(self, config: QueueConfig) -> None:
        """Create the queue of ``config`` unless it exists (the first config of a name wins)."""
        if (config.kind, config.name) not in self.queues:
            self.queues[(config.kind, config.name)] = QueueState(config)

    def check_open(self) -> None:
        """Raises:
        ShutDownError: the backend was closed.
        """
        if self.closed:
            raise ShutDownError("backend is shut down")

    # -- making envelopes deliverable ---------------------------------------------------------

    def publish(self, envelopes: Sequence[Envelope], delay: timedelta | None) -> None:
        """Make ``envelopes`` deliverable after ``delay`` (``None`` or zero = now)."""
        for envelope in envelopes:
            if delay and delay > timedelta(0):
                self._later(delay, envelope, "delayed")
            else:
                self.insert(envelope)

    def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Hold ``envelope`` for ``delay`` (counted as ``held``), then make it deliverable."""
        if delay > timedelta(0):
            self._later(delay, envelope, "held")
        else:
            self.insert(envelope)

    def insert(self, envelope: Envelope) -> None:
        """Make ``envelope`` deliverable now, at its priority (dropped once closed)."""
        if self.closed:
            return
        queue = self.queue(envelope.queue, envelope.kind)
        if envelope.kind == "topic" and not envelope.job_type:
            queue.acked.append(envelope)  # nobody subscribes: recorded as handled (seed 000)
            return
        ttl = queue.config.message_ttl
        expires = None if ttl is None else now() + ttl.total_seconds()
        index = next(
            (i for i, p in enumerate(queue.pending) if p.envelope.priority < envelope.priority),
            len(queue.pending),
        )
        queue.pending.insert(index, Pending(envelope, expires))
        queue.changed.set()
        self._activity.set()

    def _later(self, delay: timedelta, envelope: Envelope, counter: Timer) -> None:
        queue = self.queue(envelope.queue, envelope.kind)
        _count(queue, counter, +1)
        waiting = Waiting(envelope, queue, counter)

        def release() -> None:
            if self._timers.get(envelope.job_id) is waiting:
                del self._timers[envelope.job_id]
            _count(queue, counter, -1)
            self.insert(envelope)

        waiting.handle = asyncio.get_running_loop().call_later(delay.total_seconds(), release)
        self._timers[envelope.job_id] = waiting

    def cancel(self, job_id: str) -> CancelResult:
        """Cancel job ``job_id``: a pending or waiting one leaves its queue for the cancelled
        list; a running one (handed out, unsettled) is listed too and its request is set."""
        waiting = self._timers.pop(job_id, None)
        if waiting is not None:
            if waiting.handle is not None:
                waiting.handle.cancel()
            _count(waiting.queue, waiting.counter, -1)
            return self._cancelled(waiting.queue, waiting.envelope)
        for queue in self.queues.values():
            for index, item in enumerate(queue.pending):
                if item.envelope.job_id == job_id:
                    del queue.pending[index]
                    return self._cancelled(queue, item.envelope)
        request = self.running.get(job_id)
        if request is None or request.done():
            return "not_found"
        request.set_result(None)
        return "requested"

    def _cancelled(self, queue: QueueState, envelope: Envelope) -> Literal["cancelled"]:
        queue.cancelled.append(envelope)
        self._activity.set()
        return "cancelled"

    # -- deliveries out -----------------------------------------------------------------------

    def handed_out(self) -> None:
        """A consumer handed out a delivery."""
        self._in_flight += 1

    def settled(self) -> None:
        """A handed-out delivery was settled."""
        self._in_flight -= 1
        self._activity.set()

    def is_idle(self) -> bool:
        """Nothing pending, delayed, held or handed out and unsettled."""
        return self._in_flight == 0 and all(
            not q.pending and not q.held and not q.delayed for q in self.queues.values()
        )

    async def wait_idle(self) -> None:
        """Return once ``is_idle()`` holds (wakes on every change, never polls)."""
        while not self.is_idle():
            self._activity.clear()
            await self._activity.wait()

    def close(self) -> None:
        """Refuse further work, cancel the timers, and wake every waiting consumer."""
        self.closed = True
        for waiting in self._timers.values():
            if waiting.handle is not None:
                waiting.handle.cancel()
        self._timers.clear()
        for queue in self.queues.values():
            queue.changed.set()


def _count(queue: QueueState, counter: Timer, step: int) -> None:
    if counter == "held":
        queue.held += step
    else:
        queue.delayed += step
