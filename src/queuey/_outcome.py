"""Outcomes and the settle decision, as pure values and functions: what happens to a delivery
given how its handler ended (the per-delivery algorithm).

Both faces decide here: ``decide`` for typed jobs (signals and a ``RetryPolicy``), and
``after_failure`` (the retry budget: retry after a delay, or dead-letter when it is spent) for
every retryable failure of either face. ``spent_attempts`` is the one place the budget is
counted. Every backend applies the same decision; this module does no I/O.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import ClassVar, Protocol

from queuey._text import MAX_TEXT_BYTES, clean_text
from queuey.envelope import Envelope
from queuey.errors import Defer, Fatal
from queuey.retry import RetryPolicy

__all__ = [
    "EXHAUSTED",
    "MAX_TEXT_BYTES",
    "Ack",
    "Cancelled",
    "DEFERRALS",
    "DeadLetter",
    "DeferFor",
    "Deferrals",
    "LeaseLost",
    "Outcome",
    "OutcomeKind",
    "RetryAfter",
    "Schedule",
    "after_failure",
    "clean_text",
    "decide",
    "describe",
    "spent_attempts",
]


class OutcomeKind(Enum):
    """What became of a delivery; the value is the ``QueueStats`` field that counts it."""

    SUCCEEDED = "succeeded"
    RETRIED = "retried"
    DEFERRED = "deferred"
    DEAD = "dead"
    CANCELLED = "cancelled"
    LEASE_LOST = "lease_lost"


@dataclass(frozen=True, slots=True)
class Ack:
    """The handler succeeded; ``result`` is its return value as JSON text, for a job that
    declares a result type (``None`` otherwise)."""

    result: str | None = None
    kind: ClassVar[OutcomeKind] = OutcomeKind.SUCCEEDED

    @property
    def text(self) -> str:
        """Always ``""``."""
        return ""


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """Schedule ``envelope`` (the next attempt) after ``delay``; ``error`` says why
    (``exception``, when known, is what the handler raised: for tracing, never stored)."""

    envelope: Envelope
    delay: timedelta
    error: str
    exception: BaseException | None = field(default=None, compare=False, repr=False)
    kind: ClassVar[OutcomeKind] = OutcomeKind.RETRIED

    @property
    def text(self) -> str:
        """The error."""
        return self.error


@dataclass(frozen=True, slots=True)
class DeferFor:
    """Hold ``envelope`` (deferrals + 1, top priority) for ``delay``; no attempt spent."""

    envelope: Envelope
    delay: timedelta
    reason: str
    kind: ClassVar[OutcomeKind] = OutcomeKind.DEFERRED

    @property
    def text(self) -> str:
        """The reason."""
        return self.reason


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Dead-letter the delivery with ``reason`` (``exception``: as for ``RetryAfter``)."""

    reason: str
    exception: BaseException | None = field(default=None, compare=False, repr=False)
    kind: ClassVar[OutcomeKind] = OutcomeKind.DEAD

    @property
    def text(self) -> str:
        """The reason."""
        return self.reason


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The job was cancelled while it ran: the backend already records it as cancelled (a
    terminal state, never retried); the delivery is only freed.

    Also what a retry or deferral is reported as once the backend ended the job cancelled
    instead (``superseded_by``: the job that took its unique key while it ran; ``replaced``:
    the error or reason of the retry or deferral it replaced)."""

    superseded_by: str | None = None
    replaced: str = ""
    kind: ClassVar[OutcomeKind] = OutcomeKind.CANCELLED

    @property
    def text(self) -> str:
        """``"cancelled"``, or ``"superseded by job ID"``."""
        if self.superseded_by is not None:
            return f"superseded by job {self.superseded_by}"
        return "cancelled"


@dataclass(frozen=True, slots=True)
class LeaseLost:
    """The run lost its lease while it ran (the backend found the job no longer held by this
    process: it may run elsewhere, redelivered); the run was stopped and nothing of it is
    recorded; the delivery is only freed."""

    kind: ClassVar[OutcomeKind] = OutcomeKind.LEASE_LOST

    @property
    def text(self) -> str:
        """Always ``"lease lost"``."""
        return "lease lost"


Outcome = Ack | RetryAfter | DeferFor | DeadLetter | Cancelled | LeaseLost
"""Every outcome has ``kind`` (an ``OutcomeKind``) and ``text`` (the error or reason, ``""`` on
success)."""


EXHAUSTED = "max attempts ({max_attempts}) exhausted after attempt {attempt}: {text}"
"""The typed face's dead-letter reason once the retry budget is spent."""


class Schedule(Protocol):
    """When to run a failed delivery again (a ``RetryPolicy``, or a topic app's backoff)."""

    @property
    def max_attempts(self) -> int:
        """Runs allowed in all, the first included (>= 1)."""
        ...

    def decide(self, failed_attempt: int, rng: random.Random | None = None) -> timedelta | None:
        """The wait before the next run after ``failed_attempt`` (1-based) failed, or
        ``None`` when the budget is spent."""
        ...


def describe(error: BaseException) -> str:
    """The text recorded for a handler's exception: its message, else its class name (also
    when the exception cannot even be turned into text), made storable by ``clean_text``."""
    try:
        text = str(error)
    except Exception:
        text = ""
    return clean_text(text or type(error).__name__)


def spent_attempts(envelope: Envelope) -> int:
    """The runs of ``envelope`` that count against its retry budget: ``attempt`` minus the
    redeliveries (a lost worker is not a failure the handler reported)."""
    return envelope.attempt - envelope.redeliveries


def after_failure(
    envelope: Envelope,
    text: str,
    schedule: Schedule,
    rng: random.Random | None = None,
    reason: str = "{text}",
    exception: BaseException | None = None,
) -> RetryAfter | DeadLetter:
    """The outcome of a retryable failure described by ``text`` (already storable).

    Args:
        envelope: the delivered envelope.
        text: the failure text, kept with the retry.
        schedule: gives the wait before the next run, or ``None`` when the budget is spent.
        rng: random source for jitter (injectable for tests).
        reason: the dead-letter reason, a ``str.format`` template of ``text``, ``attempt`` and
            ``max_attempts``; made storable by ``clean_text``.
        exception: what was raised, if known (kept on the outcome for tracing).

    Returns:
        ``RetryAfter`` the next attempt after the wait, or ``DeadLetter`` with the reason.
    """
    delay = schedule.decide(spent_attempts(envelope), rng)
    if delay is None:
        filled = reason.format(
            text=text, attempt=envelope.attempt, max_attempts=schedule.max_attempts
        )
        return DeadLetter(clean_text(filled), exception)
    return RetryAfter(envelope.next_attempt(), delay, text, exception)


@dataclass(frozen=True, slots=True)
class Deferrals:
    """The bounds on a job's deferrals (``Worker(max_deferrals=..., min_defer=...)``).

    A deferred job comes back at its queue's top priority, ahead of every due job of lower
    priority. Two bounds keep that from starving the queue: each deferral holds the job for at
    least ``min_delay`` (``Defer(0)`` included), so between two runs of a deferring job the
    worker claims what else is due; and a job deferred ``most`` times is dead-lettered at its
    next deferral, so a job that only ever defers ends.

    Attributes:
        most: deferrals allowed per job (>= 0); the next one dead-letters it.
        min_delay: the shortest hold of a deferral (> 0); a shorter ``Defer`` is raised to it.
    """

    most: int = 100
    min_delay: timedelta = timedelta(seconds=1)

    def outcome(self, envelope: Envelope, signal: Defer, top_priority: int) -> Outcome:
        """``DeferFor`` the signal's delay (at least ``min_delay``), or a ``DeadLetter`` whose
        reason says the bound was reached."""
        reason = clean_text(signal.reason)
        if envelope.deferrals >= self.most:
            text = (
                f"deferred {envelope.deferrals} times, the most max_deferrals ({self.most}) "
                f"allows: a job that keeps deferring never ends (last deferral: {reason}); "
                "raise Worker(max_deferrals=...) if it waits on purpose"
            )
            return DeadLetter(clean_text(text), signal)
        delay = max(signal.delay, self.min_delay)
        return DeferFor(envelope.deferred(top_priority), delay, reason)


DEFERRALS = Deferrals()
"""The default bounds: 100 deferrals per job, each holding it at least 1 s."""


def decide(
    envelope: Envelope,
    error: BaseException | None,
    policy: RetryPolicy,
    top_priority: int,
    rng: random.Random | None = None,
    deferrals: Deferrals = DEFERRALS,
) -> Outcome:
    """Map a typed job handler's ending to an outcome.

    Args:
        envelope: the delivered envelope.
        error: ``None`` on success, else what the handler raised (a ``TimeoutError`` for a
            timeout).
        policy: the effective retry policy (job's, else queue's, else one attempt).
        top_priority: the queue's ``max_priority`` (or 0), given to deferred jobs.
        rng: random source for jitter (injectable for tests).
        deferrals: the bounds on a ``Defer`` (see ``Deferrals``).
    """
    if error is None:
        return Ack()
    if isinstance(error, Defer):
        return deferrals.outcome(envelope, error, top_priority)
    if isinstance(error, Fatal):
        return DeadLetter(clean_text(f"fatal error: {describe(error)}"), error)
    return after_failure(envelope, describe(error), policy, rng, EXHAUSTED, error)
