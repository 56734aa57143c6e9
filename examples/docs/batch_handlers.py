"""How-to: batch handlers (in memory; the same on PostgreSQL and RabbitMQ)."""

from __future__ import annotations

import asyncio

from queuey import BatchContext, Defer, Fatal, Job, MemoryBackend, Producer, Queue, QueueSet, Worker


# --8<-- [start:declare]
class Mail(QueueSet, prefix="mail"):
    outbox = Queue(prefetch=100)  # a full batch needs as many rows claimed at once


class SendEmail(Job[Mail], queue=Mail.outbox):
    to: str
    subject: str


# --8<-- [end:declare]

sent: list[str] = []


def make_worker(backend: MemoryBackend) -> Worker[Mail]:
    # --8<-- [start:handler]
    worker = Worker(Mail, backend, concurrency=100)  # each job of a batch holds a slot

    @worker.batch_handler(SendEmail, size=100, wait="50ms")
    async def send(jobs: list[SendEmail], ctx: BatchContext) -> list[BaseException | None]:
        outcomes: list[BaseException | None] = []
        for job, job_ctx in zip(jobs, ctx.jobs, strict=True):
            if "@" not in job.to:
                outcomes.append(Fatal(f"not an address: {job.to!r}"))  # dead-lettered
            elif job.to.endswith("@busy.example") and job_ctx.deferrals == 0:
                outcomes.append(Defer("1s", "mailbox busy"))  # held, then delivered again
            else:
                sent.append(job.to)  # one call to the mail service for the whole batch
                outcomes.append(None)  # success
        return outcomes  # or None when every job succeeded

    # --8<-- [end:handler]
    return worker


async def main() -> None:
    backend = MemoryBackend()
    worker = make_worker(backend)
    producer = await Producer.create(Mail, backend)
    addresses = [f"user{n}@example.com" for n in range(250)] + ["nobody", "x@busy.example"]
    await producer.enqueue_many([SendEmail(to=to, subject="hello") for to in addresses])
    running = asyncio.create_task(worker.run())
    stats = worker.stats[Mail.outbox.name]
    while stats.succeeded + stats.dead < len(addresses):
        await asyncio.sleep(0.05)
    worker.shutdown()
    await running
    assert (stats.succeeded, stats.dead, stats.deferred) == (251, 1, 1)
    assert sorted(sent) == sorted(a for a in addresses if a != "nobody")


if __name__ == "__main__":
    asyncio.run(main())
