"""The memory backend's records: what waits in a queue (``Pending``, ``Waiting``), one queue's
state (``QueueState``) and the latest state of one job (``JobRecord``), the plain values the
``Store`` keeps and its consumers read. Times are on the event loop's clock (``now``), virtual
under a virtual-time loop."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from queuey.attempts import AttemptError
from queuey.backends.base import JobEnd, JobInfo, JobState, Progress
from queuey.backends.memory._ends import TERMINAL
from queuey.backends.memory._flow import Flow
from queuey.backends.memory._keys import WallClock
from queuey.envelope import Envelope
from queuey.queues import QueueConfig

__all__ = ["WORKER", "JobRecord", "Pending", "QueueState", "Timer", "Waiting", "now"]

Timer = Literal["held", "delayed"]
"""Which counter an envelope waiting on a timer is in: ``defer`` or a delayed publish."""


def now() -> float:
    """The running event loop's clock (virtual under looptime)."""
    return asyncio.get_running_loop().time()


@dataclass
class Pending:
    """An envelope waiting to be handed out, when it expires, since when it is due (loop)."""

    envelope: Envelope
    expires_at: float | None
    since: float = field(default_factory=now)


WORKER = f"{socket.gethostname()}:{os.getpid()}"
"""The worker named in the attempt errors this process records."""


@dataclass
class JobRecord:
    """The latest state of one job: its envelope, where it is, runs started, when it is or was
    due (loop time), its last error, its result (JSON text) and last progress."""

    envelope: Envelope
    state: JobState
    attempts: int
    due: float
    last_error: str | None = None
    result: str | None = None
    progress: Progress | None = None
    errors: tuple[AttemptError, ...] = ()

    def end(self) -> JobEnd | None:
        """How the job ended (``None`` while it has not)."""
        if self.state not in TERMINAL:
            return None
        return JobEnd(self.state, self.last_error, self.result)

    def info(self, clock: WallClock) -> JobInfo:
        """As a ``JobInfo``, its due time on ``clock`` (the store's wall clock, UTC)."""
        envelope = self.envelope
        due_at = datetime.fromtimestamp(clock.epoch() + self.due - now(), UTC)
        return JobInfo(
            id=envelope.job_id,
            kind=envelope.kind,
            queue=envelope.queue,
            job_type=envelope.job_type,
            state=self.state,
            attempts=self.attempts,
            redeliveries=envelope.redeliveries,
            deferrals=envelope.deferrals,
            priority=envelope.priority,
            due_at=due_at,
            last_error=self.last_error,
            payload=envelope.payload,
            result=None if self.result is None else json.loads(self.result),
            progress=self.progress,
            errors=self.errors,
        )


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
    flow: Flow = field(default_factory=Flow)


@dataclass
class Waiting:
    """An envelope waiting on a timer (delayed or held), so that ``cancel`` can stop it."""

    envelope: Envelope
    queue: QueueState
    counter: Timer
    handle: asyncio.TimerHandle | None = None
