"""What happens to a topic message after its function ran, as pure functions: done, retried
after ``retry_delay_secs`` or failed for good.

Success acks. A failure retries after ``retry_delay_secs(attempts)`` until ``max_attempts`` runs,
then the message is left failed (dead-lettered) with the error text, cut to 4000 bytes. The
budget and the outcomes are ``queuey._outcome``'s (``after_failure``), shared with typed jobs;
only the schedule (``TopicRetry``) and the texts are the topic face's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from queuey._outcome import MAX_TEXT_BYTES, Ack, Outcome, after_failure, clean_text, describe
from queuey.envelope import Envelope
from queuey.topics.config import QueuesConfig

__all__ = [
    "MAX_ERROR_BYTES",
    "TopicRetry",
    "decide",
    "error_text",
    "not_loaded",
    "truncate_error",
]

MAX_ERROR_BYTES = MAX_TEXT_BYTES


truncate_error = clean_text


def error_text(error: BaseException) -> str:
    """The text recorded for a function's exception: ``"Type: message"`` (or ``"Type"``),
    storable and at most 4000 bytes (``clean_text``)."""
    message = describe(error)
    name = type(error).__name__
    return clean_text(f"{name}: {message}") if message != name else name


def not_loaded(subscriber: str, topic: str) -> str:
    """The reason a message fails when its subscriber's function is not loaded."""
    return f"`{subscriber}` is subscribed to `{topic}` but no such function is loaded"


@dataclass(frozen=True, slots=True)
class TopicRetry:
    """The ``[queues]`` backoff as a retry ``Schedule``: ``retry_delay_secs(failed)`` seconds
    until ``max_attempts`` runs failed."""

    config: QueuesConfig

    @property
    def max_attempts(self) -> int:
        """Runs allowed in all, the first included."""
        return self.config.max_attempts

    def decide(self, failed_attempt: int, rng: random.Random | None = None) -> timedelta | None:
        """The wait after ``failed_attempt`` failed, or ``None`` when none is left (``rng`` is
        unused: the topic backoff has no jitter)."""
        if failed_attempt >= self.config.max_attempts:
            return None
        return timedelta(seconds=self.config.retry_delay_secs(failed_attempt))


def decide(
    envelope: Envelope,
    error: str | None,
    retry: TopicRetry,
    exception: BaseException | None = None,
) -> Outcome:
    """Map a run's ending to an outcome.

    Args:
        envelope: the delivered message (``attempt`` is the 1-based run number).
        error: ``None`` on success, else the failure text.
        retry: the app's schedule (``max_attempts`` and the backoff).
        exception: what the function raised, if it raised (kept on the outcome: its type and
            traceback go to the message's attempt errors and the log).
    """
    if error is None:
        return Ack()
    return after_failure(envelope, clean_text(error), retry, exception=exception)
