"""What a settle on RabbitMQ leaves on the broker: a dead letter carries ``x-death-reason``,
``x-original-queue`` and ``x-attempts`` and is in ``q.dead`` before the original is
acknowledged (so a crash between the two duplicates, never loses); a retry's log line states
the delay the hold queue really applies (rounded up to the hold granularity)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import Any

import pytest
from aio_pika.abc import AbstractConnection

from queuey import Fatal, Job, JobContext, Producer, Queue, QueueSet, RetryPolicy, Worker
from queuey.backends.rabbitmq import RabbitMqBackend
from queuey.backends.rabbitmq._inbound import Inbound
from tests.helpers import run_until

pytestmark = pytest.mark.rabbitmq


def _kit(**options: Any) -> tuple[type[QueueSet], type[Job[Any]], str]:
    prefix = f"sp{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        work = Queue(**options)

    class Task(Job[Queues], queue=Queues.work, name=f"{prefix}.Task"):
        label: str = ""

    return Queues, Task, f"{prefix}.work"


async def test_a_dead_letter_carries_its_origin_and_is_in_q_dead_before_the_ack(
    rabbitmq: RabbitMqBackend, raw: AbstractConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    queues, task, queue = _kit(retry=RetryPolicy.fixed(2, "10ms"))
    producer = await Producer.create(queues, rabbitmq)
    channel = await raw.channel()
    dead_at_ack: list[int] = []
    original_ack = Inbound.ack

    def ack(self: Inbound, multiple: bool = False) -> Awaitable[None]:
        async def checked() -> None:
            if self.message_id == job_id:  # what the broker holds when this ack is sent
                dead = await channel.declare_queue(f"{queue}.dead", passive=True)
                dead_at_ack.append(dead.declaration_result.message_count or 0)
            await original_ack(self, multiple)

        return checked()

    monkeypatch.setattr(Inbound, "ack", ack)
    worker = Worker(queues, rabbitmq)

    @worker.handler(task)
    async def handle(job: Any, ctx: JobContext) -> None:
        if ctx.attempt == 2:
            raise Fatal("no such mailbox")
        raise RuntimeError("busy")

    job_id = await producer.enqueue(task(label="x"))
    await run_until(worker, lambda: worker.stats[queue].dead == 1)
    assert dead_at_ack[-1] == 1, "the original was acknowledged before its dead letter was in"
    dead = await channel.get_queue(f"{queue}.dead", ensure=False)
    message = await dead.get(no_ack=True)
    assert message.message_id == job_id
    assert message.headers["x-original-queue"] == queue
    assert message.headers["x-attempts"] == 2
    assert message.headers["x-death-reason"] == "fatal error: no such mailbox"


async def test_a_retry_logs_the_delay_its_hold_queue_applies(
    rabbitmq: RabbitMqBackend, caplog: pytest.LogCaptureFixture
) -> None:
    queues, task, _ = _kit(retry=RetryPolicy.fixed(2, "50ms"))
    producer = await Producer.create(queues, rabbitmq)
    worker = Worker(queues, rabbitmq)
    runs: list[float] = []

    @worker.handler(task)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append(asyncio.get_running_loop().time())
        if ctx.attempt == 1:
            raise RuntimeError("busy")

    await producer.enqueue(task())
    with caplog.at_level(logging.WARNING, logger="queuey.worker"):
        await run_until(worker, lambda: len(runs) == 2)
    (line,) = [r.getMessage() for r in caplog.records if "failed; retry in" in r.getMessage()]
    assert "failed; retry in 1.000s: " in line, line
    assert runs[1] - runs[0] >= 0.95  # the hold queue's second, not the policy's 50 ms
