"""How-to: rate limits, concurrency caps and fairness (in memory; exact across processes on
PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from queuey import (
    Concurrency,
    Job,
    JobContext,
    MemoryBackend,
    Producer,
    Queue,
    QueueSet,
    RateLimit,
    Worker,
)


# --8<-- [start:declare]
class Mail(QueueSet, prefix="mail"):
    # the whole queue: at most 14 sends per second (a provider's quota)
    outbound = Queue(limits=[RateLimit(14, per="1s")])


class SendEmail(
    Job[Mail],
    queue=Mail.outbound,
    limits=[
        Concurrency(3, by="tenant"),  # at most 3 of one tenant running at once
        RateLimit(5, per="1s", by="tenant", burst=4),  # two windows on one key: 5 at once,
        RateLimit(1000, per="1h", by="tenant", burst=100),  # then 5 a second; 1,000 an hour
    ],
):
    tenant: str
    to: str


# --8<-- [end:declare]


async def main() -> None:
    backend = MemoryBackend()  # or a PostgresBackend: the limits hold across every process
    producer = await Producer.create(Mail, backend)
    await producer.enqueue_many(
        [SendEmail(tenant=tenant, to=f"{n}@example.com") for n in range(10) for tenant in "ab"]
    )
    worker = Worker(Mail, backend, concurrency=16)
    starts: dict[str, list[float]] = defaultdict(list)

    @worker.handler(SendEmail)
    async def send(job: SendEmail, ctx: JobContext) -> None:
        starts[job.tenant].append(asyncio.get_running_loop().time())
        assert ctx.attempt == 1  # a job held back is not an attempt

    task = asyncio.create_task(worker.run())
    while sum(map(len, starts.values())) < 20:
        await asyncio.sleep(0.1)
    worker.shutdown()
    await task
    every = sorted(t for times in starts.values() for t in times)
    assert all(sum(s <= t < s + 1 for t in every) <= 14 for s in every)  # the queue: 14 a second
    for times in starts.values():  # a tenant: 5 a second, plus a burst of 4 after a quiet spell
        assert all(sum(s <= t < s + 1 for t in times) <= 5 + 4 for s in times)


if __name__ == "__main__":
    asyncio.run(main())
