"""Applying an outcome to its delivery: the one place an ``Outcome`` becomes a backend call;
and handing a delivery back untouched when shutdown cancelled its handler."""

from __future__ import annotations

import asyncio
import logging

from queuey._outcome import Ack, DeferFor, Outcome, RetryAfter
from queuey.backends.base import Delivery

__all__ = ["give_up", "release", "settle"]

log = logging.getLogger("queuey.worker")


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
