"""Delivery I/O: applying an outcome to its delivery (the one place an ``Outcome`` becomes a
backend call), handing a delivery back untouched when shutdown cancelled its handler, and
giving up on one whose processing crashed.

An outcome the backend refuses for good (``refused``: its settle raised a ``ValueError``, as
the PostgreSQL backend's ``RefusedError`` is, for a value out of the database's range or a
constraint; never a lost connection) can never be recorded, so the runner records
``unrecordable`` instead: a dead letter whose reason says which outcome could not be recorded
and why.
"""

from __future__ import annotations

import asyncio
import logging

from queuey._outcome import (
    Ack,
    Cancelled,
    DeadLetter,
    DeferFor,
    LeaseLost,
    Outcome,
    RetryAfter,
    clean_text,
)
from queuey.attempts import AttemptError
from queuey.backends.base import Delivery

__all__ = ["give_up", "refused", "release", "settle", "stopped", "unrecordable"]

log = logging.getLogger("queuey.worker")


async def settle(delivery: Delivery, outcome: Outcome) -> None:
    """Record ``outcome`` for ``delivery`` (ack, retry, defer, dead letter, record a cancelled
    one, or free one whose lease was lost); a retry and a dead letter add the run's
    ``AttemptError`` to the job's history.

    Raises:
        BackendError: the backend could not record it (the delivery comes again later).
        ValueError: the backend refused it for good (``refused``).
    """
    match outcome:
        case Ack(result=None):
            await delivery.ack()
        case Ack(result=result):
            await delivery.ack(result)
        case RetryAfter(envelope=envelope, delay=delay, error=error, exception=exception):
            failure = AttemptError.of(delivery.envelope.attempt, exception, error)
            await delivery.retry(envelope, delay, error, failure)
        case DeferFor(envelope=envelope, delay=delay):
            await delivery.defer(envelope, delay)
        case DeadLetter(reason=reason, exception=exception):
            failure = AttemptError.of(delivery.envelope.attempt, exception, reason)
            await delivery.dead_letter(reason, failure)
        case Cancelled() | LeaseLost():
            await delivery.cancelled()


def stopped(delivery: Delivery) -> Cancelled | LeaseLost:
    """The outcome of a run stopped by its ``cancel_requested``: ``LeaseLost`` when the backend
    found the lease lost (``Delivery.lease_lost``), else ``Cancelled``."""
    return LeaseLost() if delivery.lease_lost else Cancelled()


def refused(error: BaseException) -> bool:
    """Whether a settle failed because the backend refused the outcome itself (a
    ``ValueError``: recording it again would fail the same way), not because it could not be
    reached."""
    return isinstance(error, ValueError)


def unrecordable(outcome: Outcome, error: BaseException) -> DeadLetter:
    """The dead letter recorded instead of ``outcome``, which the backend refused with
    ``error``: its reason names the outcome, the refusal and the run's own error or reason."""
    what = "the outcome"
    match outcome:
        case Ack():
            what = "the success"
        case RetryAfter(delay=delay):
            what = f"the retry in {delay.total_seconds():g}s"
        case DeferFor(delay=delay):
            what = f"the deferral for {delay.total_seconds():g}s"
        case DeadLetter():
            what = "the dead letter"
    text = f"could not record {what}: {error}"
    if outcome.text:
        text += f" (the outcome's reason: {outcome.text})"
    return DeadLetter(clean_text(text))


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
