"""The settle decision as a pure function: what happens to a delivery given how its handler
ended (seed ``001``'s per-delivery algorithm, SEEDS-DIGEST §2.7).

Every backend applies the same decision; this module does no I/O.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from queuey.envelope import Envelope
from queuey.errors import Defer, Fatal
from queuey.retry import RetryPolicy

__all__ = [
    "MAX_TEXT_BYTES",
    "Ack",
    "DeadLetter",
    "DeferFor",
    "Outcome",
    "RetryAfter",
    "clean_text",
    "decide",
    "describe",
]


@dataclass(frozen=True)
class Ack:
    """The handler succeeded."""


@dataclass(frozen=True)
class RetryAfter:
    """Schedule ``envelope`` (the next attempt) after ``delay``; ``error`` says why."""

    envelope: Envelope
    delay: timedelta
    error: str


@dataclass(frozen=True)
class DeferFor:
    """Hold ``envelope`` (deferrals + 1, top priority) for ``delay``; no attempt spent."""

    envelope: Envelope
    delay: timedelta
    reason: str


@dataclass(frozen=True)
class DeadLetter:
    """Dead-letter the delivery with ``reason``."""

    reason: str


Outcome = Ack | RetryAfter | DeferFor | DeadLetter


MAX_TEXT_BYTES = 4000
"""Error texts and reasons are kept to this many UTF-8 bytes (seed ``000``)."""


def clean_text(text: str, limit: int = MAX_TEXT_BYTES) -> str:
    """``text`` made storable everywhere: NUL characters dropped, unpaired surrogates replaced
    by ``?``, and cut to ``limit`` UTF-8 bytes on a character boundary with ``…`` appended when
    cut (so at most ``limit`` + 3 bytes)."""
    data = text.replace("\x00", "").encode("utf-8", errors="replace")
    if len(data) <= limit:
        return data.decode("utf-8")
    return data[:limit].decode("utf-8", errors="ignore") + "…"


def describe(error: BaseException) -> str:
    """The text recorded for a handler's exception: its message, else its class name (also
    when the exception cannot even be turned into text), made storable by ``clean_text``."""
    try:
        text = str(error)
    except Exception:
        text = ""
    return clean_text(text or type(error).__name__)


def decide(
    envelope: Envelope,
    error: BaseException | None,
    policy: RetryPolicy,
    top_priority: int,
    rng: random.Random | None = None,
) -> Outcome:
    """Map a handler's ending to an outcome.

    Args:
        envelope: the delivered envelope.
        error: ``None`` on success, else what the handler raised (a ``TimeoutError`` for a
            timeout).
        policy: the effective retry policy (job's, else queue's, else one attempt).
        top_priority: the queue's ``max_priority`` (or 0), given to deferred jobs.
        rng: random source for jitter (injectable for tests).
    """
    if error is None:
        return Ack()
    if isinstance(error, Defer):
        return DeferFor(envelope.deferred(top_priority), error.delay, clean_text(error.reason))
    if isinstance(error, Fatal):
        return DeadLetter(clean_text(f"fatal error: {describe(error)}"))
    text = describe(error)
    # A redelivery (a lost worker) is not a failure the handler reported: the policy judges
    # only those (DESIGN §7).
    delay = policy.decide(envelope.attempt - envelope.redeliveries, rng)
    if delay is None:
        return DeadLetter(
            clean_text(
                f"max attempts ({policy.max_attempts}) exhausted after attempt "
                f"{envelope.attempt}: {text}"
            )
        )
    return RetryAfter(envelope.next_attempt(), delay, text)
