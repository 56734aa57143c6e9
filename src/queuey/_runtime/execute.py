"""Run one delivery to an outcome: look up the handler, decode the job, call the handler under
the job timeout, and decide (seed ``001``'s per-delivery algorithm, SEEDS-DIGEST §2.7).

The call itself (thread pool for plain handlers, the timeout) is ``invoke``'s.
"""

from __future__ import annotations

import time
from concurrent.futures import Executor
from datetime import timedelta

from pydantic import ValidationError

from queuey._outcome import DeadLetter, Outcome, clean_text, decide
from queuey._runtime.handlers import HandlerEntry
from queuey._runtime.invoke import HandlerTimeoutError, run_handler
from queuey.envelope import Envelope
from queuey.jobs import JobContext
from queuey.queues import QueueConfig

__all__ = ["JobTimeoutError", "execute"]

JobTimeoutError = HandlerTimeoutError
"""The handler ran past ``job_timeout``; retryable."""


def _context(envelope: Envelope, max_attempts: int) -> JobContext:
    age_ms = max(0, time.time_ns() // 1_000_000 - envelope.enqueued_at_ms)
    return JobContext(
        job_id=envelope.job_id,
        job_type=envelope.job_type,
        queue=envelope.queue,
        attempt=envelope.attempt,
        max_attempts=max_attempts,
        deferrals=envelope.deferrals,
        priority=envelope.priority,
        enqueued_at_ms=envelope.enqueued_at_ms,
        age=timedelta(milliseconds=age_ms),
        headers=dict(envelope.headers),
        redeliveries=envelope.redeliveries,
    )


async def execute(
    envelope: Envelope,
    entry: HandlerEntry | None,
    queue: QueueConfig,
    timeout: timedelta | None,
    executor: Executor,
) -> tuple[Outcome, JobContext | None]:
    """Run ``envelope`` through its handler and return the outcome (never raises, except
    ``CancelledError`` when the worker itself is cancelled)."""
    if entry is None:
        return DeadLetter(clean_text(f"no handler for job type `{envelope.job_type}`")), None
    try:
        job = entry.job_type.model_validate(envelope.payload)
    except ValidationError as exc:
        detail = clean_text(f"{exc.errors()[0]['msg']} ({exc.error_count()} errors)")
        return DeadLetter(f"decode error: {detail}"), None
    policy = entry.retry
    ctx = _context(envelope, policy.max_attempts)
    error = await run_handler(
        entry.call, (job, ctx), is_async=entry.is_async, executor=executor, timeout=timeout
    )
    return decide(envelope, error, policy, queue.top_priority), ctx
