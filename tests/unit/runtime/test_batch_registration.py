"""Registering a batch handler: bad input is refused with a message naming what is wrong, and
a job cancelled while its batch is still pending leaves the batch (the others still run)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from queuey import (
    BatchContext,
    ConfigError,
    DuplicateHandlerError,
    Job,
    JobContext,
    MemoryBackend,
    Queue,
    QueueSet,
    Worker,
)


class Mine(QueueSet, prefix="batchreg"):
    work = Queue(prefetch=10)


class Other(QueueSet, prefix="batchreg-other"):
    work = Queue()


class Mail(Job[Mine], queue=Mine.work, name="batchreg.Mail"):
    to: str


class Thumb(BaseModel):
    url: str


class Resize(Job[Mine, Thumb], queue=Mine.work, name="batchreg.Resize"):
    url: str


class Foreign(Job[Other], queue=Other.work, name="batchreg.Foreign"):
    n: int


async def handle(jobs: list[Any], ctx: BatchContext) -> None: ...


def test_bad_registrations_are_refused_naming_the_problem() -> None:
    worker = Worker(Mine, MemoryBackend())
    with pytest.raises(TypeError, match="not a job of Mine"):
        worker.batch_handler(Foreign)(handle)  # type: ignore[arg-type]

    def plain(jobs: list[Mail], ctx: BatchContext) -> None: ...

    with pytest.raises(TypeError, match="must be an async function"):
        worker.batch_handler(Mail)(plain)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="declares a result type"):
        worker.batch_handler(Resize)(handle)
    with pytest.raises(ConfigError, match="size"):
        worker.batch_handler(Mail, size=0)
    with pytest.raises(ConfigError, match="wait"):
        worker.batch_handler(Mail, wait="soon")
    worker.batch_handler(Mail)(handle)
    with pytest.raises(DuplicateHandlerError):
        worker.batch_handler(Mail)(handle)

    @worker.handler(Resize)
    async def one(job: Resize, ctx: JobContext) -> Thumb:
        return Thumb(url=job.url)

    with pytest.raises(DuplicateHandlerError):
        worker.handler(Mail)(one)
    assert worker._face.handled(Mine.work.name) == ("batchreg.Resize", "batchreg.Mail")


async def test_a_job_cancelled_while_its_batch_is_pending_leaves_it() -> None:
    from queuey._runtime.batches import Batcher, make_batch_entry
    from queuey._runtime.faces.job import job_context
    from queuey.envelope import Envelope

    called: list[list[str]] = []

    async def record(jobs: list[Mail], ctx: BatchContext) -> None:
        called.append([job.to for job in jobs])

    entry = make_batch_entry(Mail, record, 3, timedelta(seconds=0.2))
    batcher = Batcher(entry, Mine.work.name, None)

    def submit(to: str) -> asyncio.Task[BaseException | None]:
        envelope = Envelope.new("batchreg.Mail", Mine.work.name, {"to": to})
        return asyncio.create_task(batcher.submit(Mail(to=to), job_context(envelope, 1)))

    first, second = submit("a"), submit("b")
    await asyncio.sleep(0)
    first.cancel()
    assert await second is None  # called at the wait bound, without the cancelled one
    assert called == [["b"]]
    with pytest.raises(asyncio.CancelledError):
        await first
