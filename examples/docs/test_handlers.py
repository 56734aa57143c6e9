"""How-to: test handlers with the memory backend under virtual time (run with pytest)."""

from __future__ import annotations

import pytest

from queuey import (
    Job,
    JobContext,
    MemoryBackend,
    Producer,
    Queue,
    QueueSet,
    Retry,
    RetryPolicy,
    Worker,
)
from queuey.testing import enqueued, run_until_idle


class AppQueues(QueueSet, prefix="myapp"):
    emails = Queue()


class SendEmail(
    Job[AppQueues], queue=AppQueues.emails, retry=RetryPolicy.exponential(5, base="1m")
):
    to: str
    body: str


# --8<-- [start:test]
@pytest.mark.looptime  # virtual time: minutes of backoff cost no wall time
async def test_send_email_retries_then_succeeds() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(AppQueues, backend)
    worker = Worker(AppQueues, backend)
    attempts: list[int] = []

    @worker.handler(SendEmail)
    async def send_email(job: SendEmail, ctx: JobContext) -> None:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise Retry("mail server busy")

    await producer.enqueue(SendEmail(to="a@b.c", body="hi"))
    assert enqueued(backend, SendEmail) == [SendEmail(to="a@b.c", body="hi")]
    await run_until_idle(worker, backend, timeout=600)  # minutes of backoff, in no wall time
    assert attempts == [1, 2, 3]
    assert backend.dead_letters("myapp.emails") == []
    assert len(backend.acked("myapp.emails")) == 3  # each retry acks the envelope it replaces


# --8<-- [end:test]


# --8<-- [start:idle]
@pytest.mark.looptime
async def test_a_job_that_never_succeeds_ends_dead_lettered() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(AppQueues, backend)
    worker = Worker(AppQueues, backend)

    @worker.handler(SendEmail)
    async def send_email(job: SendEmail, ctx: JobContext) -> None:
        raise Retry("mail server down")

    await producer.enqueue(SendEmail(to="a@b.c", body="hi"))
    await run_until_idle(worker, backend, timeout=3600)  # an hour of loop time at most
    [(envelope, reason)] = backend.dead_letters("myapp.emails")
    assert envelope.attempt == 5 and reason.endswith("exhausted after attempt 5: mail server down")


# --8<-- [end:idle]
