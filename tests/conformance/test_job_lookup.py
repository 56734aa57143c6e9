"""Looking a job up by the id ``enqueue`` returned (``Producer.job``, ``backend.job``): the same
``JobInfo`` through a job's life on PostgreSQL and in memory; RabbitMQ says it cannot."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from queuey import JobContext, JobInfo, NotSupportedError, Producer, UnknownJobError, Worker
from queuey.backends.base import Backend
from tests.conformance.test_conformance import finished, make_kit
from tests.helpers import run_until


def rabbitmq(backend: Backend) -> bool:
    return type(backend).__name__ == "RabbitMqBackend"


async def test_a_job_is_found_in_each_state(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    if rabbitmq(backend):
        with pytest.raises(NotSupportedError, match=r"cannot look up job .* by id"):
            await producer.job("00000000-0000-4000-8000-000000000000")
        return
    job_id = await producer.enqueue(kit.Retried(fail_until=1))
    later_id = await producer.enqueue_after(kit.Plain(n=2), "1h")
    before = datetime.now(UTC)
    pending = await producer.job(job_id)
    assert isinstance(pending, JobInfo)
    queue = kit.Retried.job_queue().name
    assert (pending.id, pending.kind, pending.queue, pending.job_type) == (
        job_id,
        "job",
        queue,
        kit.Retried.job_name(),
    )
    assert (pending.state, pending.attempts, pending.last_error) == ("pending", 0, None)
    assert (pending.redeliveries, pending.deferrals, pending.priority) == (0, 0, 0)
    assert pending.payload == {"fail_until": 1}
    assert pending.due_at.tzinfo is not None and pending.due_at <= before + timedelta(seconds=5)
    scheduled = await producer.job(later_id)
    assert scheduled is not None and scheduled.state == "pending"
    assert scheduled.due_at > before + timedelta(minutes=59)

    worker = Worker(kit.queues, backend, queues=[kit.queues.retried])  # type: ignore[attr-defined]
    running = asyncio.Event()
    release = asyncio.Event()

    @worker.handler(kit.Retried)
    async def handle(job: Any, ctx: JobContext) -> None:
        if ctx.attempt <= job.fail_until:
            raise ValueError("SMTP 451 try later")
        running.set()
        await release.wait()

    task = asyncio.create_task(run_until(worker, lambda: finished(worker) == 1))
    await asyncio.wait_for(running.wait(), 15)
    now_running = await producer.job(job_id)
    assert now_running is not None
    assert (now_running.state, now_running.attempts) == ("running", 2)
    assert now_running.last_error is not None and "SMTP 451 try later" in now_running.last_error
    release.set()
    await task
    done = await producer.job(job_id)
    assert done is not None and (done.state, done.attempts) == ("done", 2)
    assert done.last_error is not None and "SMTP 451" in done.last_error  # kept, for people


async def test_a_failed_job_shows_its_reason(backend: Backend) -> None:
    if rabbitmq(backend):
        pytest.skip("RabbitMQ cannot look a job up")
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend, queues=[kit.queues.plain])  # type: ignore[attr-defined]

    @worker.handler(kit.Plain)
    async def handle(job: Any, ctx: JobContext) -> None:
        raise ValueError("no such mailbox")

    job_id = await producer.enqueue(kit.Plain(n=1))
    await run_until(worker, lambda: finished(worker) == 1)
    failed = await producer.job(job_id)
    assert failed is not None and (failed.state, failed.attempts) == ("failed", 1)
    assert failed.last_error is not None and "no such mailbox" in failed.last_error


async def test_an_unknown_job_is_none(backend: Backend) -> None:
    if rabbitmq(backend):
        pytest.skip("RabbitMQ cannot look a job up")
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    assert await producer.job("00000000-0000-4000-8000-000000000000") is None


@pytest.mark.parametrize("job_id", ["not-a-uuid", "abc", ""])
async def test_a_malformed_id_is_an_unknown_job_on_every_backend(
    backend: Backend, job_id: str
) -> None:
    """An id no job can have reads as "no such job", as for a well-formed unknown id: ``job``
    is ``None``, ``result`` raises ``UnknownJobError``, ``cancel`` says ``not_found``;
    RabbitMQ refuses all three as it does any id."""
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    if rabbitmq(backend):
        with pytest.raises(NotSupportedError):
            await producer.job(job_id)
        with pytest.raises(NotSupportedError):
            await producer.cancel(job_id)
        return
    assert await producer.job(job_id) is None
    with pytest.raises(UnknownJobError) as raised:
        await producer.result(job_id, int, timeout=1)
    assert raised.value.job_id == job_id
    assert await producer.cancel(job_id) == "not_found"
