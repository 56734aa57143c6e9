"""Migrating from Celery: the queuey side of each comparison (in memory, so it runs anywhere;
``PostgresBackend`` or ``RabbitMqBackend`` in production)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from queuey import (
    Defer,
    Job,
    JobContext,
    MemoryBackend,
    Producer,
    Queue,
    QueueSet,
    RetryPolicy,
    Schedule,
    Worker,
)
from queuey.testing import run_until_idle


class RateLimitedError(Exception):
    """The mail provider asked us to slow down."""


# --8<-- [start:task]
class Mail(QueueSet, prefix="mail"):
    outgoing = Queue(prefetch=10)  # Celery's task_routes / queue="outgoing"


class SendEmail(
    Job[Mail],
    queue=Mail.outgoing,
    name="mail.SendEmail",  # Celery's task name
    retry=RetryPolicy.exponential(max_attempts=6, base="1s", max="10m"),  # max_retries=5
):
    to: str
    subject: str


sent: list[str] = []


async def deliver(to: str, subject: str) -> None:
    """The mail provider's client (may raise ``RateLimitedError`` or ``ConnectionError``)."""
    sent.append(f"{to}: {subject}")


def build_worker(backend: MemoryBackend) -> Worker[Mail]:
    worker = Worker(Mail, backend, job_timeout="5m")  # Celery's time_limit

    @worker.handler(SendEmail)
    async def send_email(job: SendEmail, ctx: JobContext) -> None:
        try:
            await deliver(job.to, job.subject)
        except RateLimitedError:
            raise Defer(
                "1m", "rate limited"
            ) from None  # self.retry(countdown=60), no attempt spent
        # any other exception is retried by the policy (autoretry_for=(Exception,));
        # raise Retry("...") to retry on purpose, Fatal("...") to give up at once

    return worker


# --8<-- [end:task]


# --8<-- [start:beat]
DIGEST = Schedule(
    name="nightly-digest",
    cron="0 3 * * *",  # celery.schedules.crontab(hour=3, minute=0)
    tz="Europe/London",
    job=SendEmail(to="ops@example.com", subject="nightly digest"),
)
# Worker(Mail, backend, schedules=[DIGEST]): every worker may carry it; each slot fires once
# --8<-- [end:beat]


async def main() -> None:
    # --8<-- [start:call]
    backend = MemoryBackend()
    producer = await Producer.create(Mail, backend)

    job_id = await producer.enqueue(SendEmail(to="ada@example.com", subject="hi"))  # .delay()
    await producer.enqueue_after(SendEmail(to="bob@example.com", subject="later"), "10s")
    at = datetime.now(UTC) + timedelta(seconds=5)  # apply_async(eta=at)
    await producer.enqueue_after(
        SendEmail(to="eve@example.com", subject="at"), at - datetime.now(UTC)
    )
    await producer.enqueue(SendEmail(to="vip@example.com", subject="first"), priority=9)

    info = await producer.job(job_id)  # AsyncResult(job_id).state, without a result backend
    print(info.state if info else None)  # pending
    # --8<-- [end:call]
    await run_until_idle(build_worker(backend), backend)
    print(sorted(sent))
    assert sorted(sent) == [
        "ada@example.com: hi",
        "bob@example.com: later",
        "eve@example.com: at",
        "vip@example.com: first",
    ]
    done = await producer.job(job_id)
    assert done is not None and done.state == "done"
    assert DIGEST.job == SendEmail(to="ops@example.com", subject="nightly digest")


if __name__ == "__main__":
    asyncio.run(main())
