"""What happens to a topic message after its function ran, as a pure function (seed ``000``'s
``complete``/``fail``, SEEDS-DIGEST §1.8).

Success acks. A failure retries after ``retry_delay_secs(attempts)`` until ``max_attempts`` runs,
then the message is left failed (dead-lettered) with the error text, cut to 4000 bytes.
"""

from __future__ import annotations

from datetime import timedelta

from queuey._outcome import (
    MAX_TEXT_BYTES,
    Ack,
    DeadLetter,
    Outcome,
    RetryAfter,
    clean_text,
    describe,
)
from queuey.envelope import Envelope
from queuey.topics.config import QueuesConfig

__all__ = ["MAX_ERROR_BYTES", "decide", "error_text", "not_loaded", "truncate_error"]

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


def decide(envelope: Envelope, error: str | None, config: QueuesConfig) -> Outcome:
    """Map a run's ending to an outcome.

    Args:
        envelope: the delivered message (``attempt`` is the 1-based run number).
        error: ``None`` on success, else the failure text.
        config: gives ``max_attempts`` and the backoff.
    """
    if error is None:
        return Ack()
    text = clean_text(error)
    if envelope.attempt - envelope.redeliveries >= config.max_attempts:
        return DeadLetter(text)
    delay = timedelta(seconds=config.retry_delay_secs(envelope.attempt - envelope.redeliveries))
    return RetryAfter(envelope.next_attempt(), delay, text)
