"""Run one delivery to an outcome: look up the handler, decode the job, call the handler under
the job timeout, and decide (seed ``001``'s per-delivery algorithm, SEEDS-DIGEST §2.7).

A plain handler runs in the worker's thread pool. One that passes ``job_timeout`` cannot be
killed: it is abandoned (its thread runs on) and recorded as a timeout (DESIGN §2).
"""

from __future__ import annotations

import asyncio
import functools
import time
from concurrent.futures import Executor
from datetime import timedelta
from typing import Any

from pydantic import ValidationError

from queuey._outcome import DeadLetter, Outcome, decide
from queuey._runtime.handlers import HandlerEntry
from queuey.envelope import Envelope
from queuey.jobs import Job, JobContext
from queuey.queues import QueueConfig

__all__ = ["JobTimeoutError", "execute"]


class JobTimeoutError(TimeoutError):
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
    )


async def _call(
    entry: HandlerEntry,
    job: Job[Any],
    ctx: JobContext,
    timeout: timedelta | None,
    executor: Executor,
) -> None:
    limit = None if timeout is None else timeout.total_seconds()
    if entry.is_async and limit is None:
        await entry.call(job, ctx)
        return
    if entry.is_async:
        async with asyncio.timeout(limit) as scope:
            try:
                await entry.call(job, ctx)
            except asyncio.CancelledError:
                if scope.expired():
                    raise JobTimeoutError(f"job timed out after {limit:g}s") from None
                raise
        return
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(executor, functools.partial(entry.call, job, ctx))
    done, _ = await asyncio.wait([future], timeout=limit)
    if not done:
        future.cancel()  # the thread cannot be stopped: it is abandoned and runs on
        raise JobTimeoutError(f"job timed out after {limit:g}s")
    future.result()


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
        return DeadLetter(f"no handler for job type `{envelope.job_type}`"), None
    try:
        job = entry.job_type.model_validate(envelope.payload)
    except ValidationError as exc:
        return DeadLetter(
            f"decode error: {exc.errors()[0]['msg']} ({exc.error_count()} errors)"
        ), None
    policy = entry.retry
    ctx = _context(envelope, policy.max_attempts)
    error: BaseException | None = None
    try:
        await _call(entry, job, ctx, timeout, executor)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # any handler failure is an outcome, not a worker crash
        error = exc
    return decide(envelope, error, policy, queue.top_priority), ctx
