"""Clear answers where a newcomer's guess is wrong or a question has no tool yet: a job looked up
by id in memory (deferred, expired), ``run_until_idle`` timing out with what is still pending,
RabbitMQ saying it cannot look a job up."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from queuey import (
    Defer,
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
from queuey.backends.rabbitmq import RabbitMqBackend
from queuey.errors import NotSupportedError
from queuey.testing import run_until_idle


class Mail(QueueSet, prefix="nc"):
    emails = Queue(retry=RetryPolicy.fixed(50, "1m"), max_priority=5)
    brief = Queue(message_ttl="10s")


class SendEmail(Job[Mail], queue=Mail.emails, name="nc.SendEmail"):
    to: str


class Ping(Job[Mail], queue=Mail.brief, name="nc.Ping"):
    pass


@pytest.mark.looptime
async def test_run_until_idle_says_what_is_still_pending_when_it_times_out() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(Mail, backend)
    worker = Worker(Mail, backend, queues=[Mail.emails])

    @worker.handler(SendEmail)
    async def send(job: SendEmail, ctx: JobContext) -> None:
        raise Retry("SMTP 451 try later")

    await producer.enqueue(SendEmail(to="a@b.c"))
    await producer.enqueue(Ping())  # nobody consumes nc.brief
    with pytest.raises(TimeoutError) as caught:
        await run_until_idle(worker, backend, timeout=150)
    assert str(caught.value) == (
        "run_until_idle: the queues were not idle after 150 loop-seconds; still on "
        "nc.brief: 1 pending (nc.Ping); on nc.emails: 1 delayed (a delay or a retry's backoff)"
    )


@pytest.mark.looptime
async def test_a_memory_job_is_found_when_deferred() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(Mail, backend)
    worker = Worker(Mail, backend, queues=[Mail.emails])
    runs: list[int] = []

    @worker.handler(SendEmail)
    async def send(job: SendEmail, ctx: JobContext) -> None:
        runs.append(ctx.deferrals)
        if ctx.deferrals == 0:
            raise Defer("30s", "rate limited")

    job_id = await producer.enqueue(SendEmail(to="a@b.c"))
    with pytest.raises(TimeoutError):
        await run_until_idle(worker, backend, timeout=5)
    deferred = await producer.job(job_id)
    assert deferred is not None
    assert (deferred.state, deferred.attempts, deferred.deferrals, deferred.priority) == (
        "pending",
        0,
        1,
        5,
    )
    in_25s = datetime.now(UTC) + timedelta(seconds=25)
    assert in_25s - timedelta(seconds=2) < deferred.due_at < in_25s + timedelta(seconds=2)
    with pytest.raises(RuntimeError, match=r"returned before the queues were idle .* still on "):
        await run_until_idle(worker, backend, timeout=60)  # shut down: it does not run again
    await run_until_idle(worker.replace(), backend, timeout=60)
    assert runs == [0, 1]
    done = await producer.job(job_id)
    assert done is not None and (done.state, done.attempts, done.deferrals) == ("done", 1, 1)


@pytest.mark.looptime
async def test_a_memory_job_is_found_when_expired() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(Mail, backend)
    worker = Worker(Mail, backend, queues=[Mail.brief])

    @worker.handler(Ping)
    async def ping(job: Ping, ctx: JobContext) -> None:
        return None

    job_id = await producer.enqueue(Ping())
    await asyncio.sleep(11)  # past the queue's 10 s message_ttl
    await run_until_idle(worker, backend)
    expired = await producer.job(job_id)
    assert expired is not None
    assert (expired.state, expired.attempts, expired.last_error) == ("failed", 0, "expired")


async def test_rabbitmq_says_it_cannot_look_a_job_up() -> None:
    backend: Any = RabbitMqBackend("amqp://guest:guest@127.0.0.1:5672/")
    producer = Producer.undeclared(Mail, backend)
    with pytest.raises(NotSupportedError) as caught:
        await producer.job("00000000-0000-4000-8000-000000000000")
    assert "a broker keeps messages, not jobs" in str(caught.value)
    assert "PostgreSQL and MemoryBackend can" in str(caught.value)


@pytest.mark.looptime
async def test_a_memory_jobs_due_time_is_on_the_backends_wall_clock() -> None:
    start = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    backend = MemoryBackend(start=start)
    producer = await Producer.create(Mail, backend)
    job_id = await producer.enqueue_after(SendEmail(to="a@b.c"), "90s")
    found = await producer.job(job_id)
    assert found is not None
    assert abs(found.due_at - (start + timedelta(seconds=90))) < timedelta(milliseconds=1)
