"""Applying an outcome to its delivery: the one place an ``Outcome`` becomes a backend call."""

from __future__ import annotations

from queuey._outcome import Ack, DeferFor, Outcome, RetryAfter
from queuey.backends.base import Delivery

__all__ = ["settle"]


async def settle(delivery: Delivery, outcome: Outcome) -> None:
    """Record ``outcome`` for ``delivery`` (ack, retry, defer or dead letter).

    Raises:
        BackendError: the backend could not record it (the delivery comes again later).
    """
    if isinstance(outcome, Ack):
        await delivery.ack()
    elif isinstance(outcome, RetryAfter):
        await delivery.retry(outcome.envelope, outcome.delay, outcome.error)
    elif isinstance(outcome, DeferFor):
        await delivery.defer(outcome.envelope, outcome.delay)
    else:
        await delivery.dead_letter(outcome.reason)
