"""Delivery I/O: applying an outcome to its delivery (the one place an ``Outcome`` becomes a
backend call), handing a delivery back untouched when shutdown cancelled its handler, and
giving up on one whose processing crashed."""

from __future__ import annotations

import asyncio
import logging

from queuey._outcome import Ack, Cancelled, DeadLetter, DeferFor, Outcome, RetryAfter
from queuey.backends.base import Delivery

__all__ = ["give_up", "release", "settle"]

log = logging.getLogger("queuey.worker")


async def settle(delivery: Delivery, outcome: Outcome) -> None:
    """Record ``outcome`` for ``delivery`` (ack, retry, defer, dead letter, or free a cancelled
    one).

    Raises:
        BackendError: the backend could not record it (the delivery comes again later).
    """
    match outcome:
        case Ack():
            await delivery.ack()
        case RetryAfter(envelope=envelope, delay=delay, error=error):
            await delivery.retry(envelope, delay, error)
        case DeferFor(envelope=envelope, delay=delay):
            await delivery.defer(envelope, delay)
        case DeadLetter(reason=reason):
            await delivery.dead_letter(reason)
        case Cancelled():
            await delivery.cancelled()


async def release(delivery: Delivery) -> None:
    """Hand ``delivery`` back, deliverable again at once with no attempt spent (its handler was
    cancelled by shutdown). Shielded from the cancellation; a failure is only logged, since the
    lease hands the delivery back anyway."""
    try:
        await asyncio.shield(delivery.release())
    except Exception as exc:
        log.warning("could not release %s: %s", delivery.envelope.job_id, exc)


async def give_up(delivery: Delivery, reason: str) -> None:
    """Dead-letter ``delivery`` with ``reason``; if even that fails (or it was settled
    already), hand it back. Never raises."""
    try:
        await asyncio.shield(delivery.dead_letter(reason))
        return
    except Exception as exc:
        log.warning("could not dead-letter %s: %s", delivery.envelope.job_id, exc)
    await release(delivery)
