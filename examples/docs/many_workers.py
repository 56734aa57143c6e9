"""How-to: many workers on one PostgreSQL queue. Each worker here has its own backend (its own
pool), as a worker process on another machine would: every job runs once, every schedule slot
fires once."""

from __future__ import annotations

import asyncio
import os
from collections import Counter

from queuey import Job, JobContext, Producer, Queue, QueueSet, Schedule, Worker
from queuey.backends.postgres import PostgresBackend

DATABASE_URL = os.environ.get(
    "QUEUEY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
SCHEMA = os.environ.get("QUEUEY_SCHEMA", "queuey")


class Media(QueueSet, prefix="media"):
    thumbnails = Queue(prefetch=4)
    videos = Queue(prefetch=1)  # one slow job per worker at a time


class Thumbnail(Job[Media], queue=Media.thumbnails, name="media.Thumbnail"):
    image: int


class Sweep(Job[Media], queue=Media.thumbnails, name="media.Sweep"):
    pass


runs: Counter[str] = Counter()


# --8<-- [start:worker]
def build_worker(backend: PostgresBackend) -> Worker[Media]:
    """What ``queuey worker myapp.workers:build`` would run in each process."""
    worker = Worker(
        Media,
        backend,
        queues=[Media.thumbnails],  # this pool of workers takes thumbnails only
        concurrency=4,  # jobs at once in this process
        job_timeout="1m",
        shutdown_grace="30s",  # on SIGTERM, wait this long for running jobs
        schedules=[Schedule(name="sweep", every="1s", job=Sweep())],  # fired once per slot
    )

    @worker.handler(Thumbnail)
    async def thumbnail(job: Thumbnail, ctx: JobContext) -> None:
        runs[f"thumbnail {job.image}"] += 1

    @worker.handler(Sweep)
    async def sweep(job: Sweep, ctx: JobContext) -> None:
        runs[f"sweep {ctx.job_id}"] += 1

    return worker


# --8<-- [end:worker]


async def main() -> None:
    backends = [
        await PostgresBackend.connect(DATABASE_URL, schema=SCHEMA, migrate=True) for _ in range(3)
    ]
    producer = await Producer.create(Media, backends[0])
    await producer.enqueue_many([Thumbnail(image=n) for n in range(50)])
    workers = [build_worker(backend) for backend in backends]
    tasks = [asyncio.create_task(worker.run()) for worker in workers]
    await asyncio.sleep(3)  # three one-second slots, fifty thumbnails
    for worker in workers:
        worker.shutdown()
    await asyncio.gather(*tasks)
    for backend in backends:
        await backend.close()
    print(sum(1 for name in runs if name.startswith("sweep")), "sweeps")
    assert {name: count for name, count in runs.items() if count != 1} == {}  # each ran once
    assert sum(1 for name in runs if name.startswith("thumbnail")) == 50


if __name__ == "__main__":
    asyncio.run(main())
