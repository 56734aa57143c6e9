"""How-to: typed results and progress (in memory; the same on PostgreSQL)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from queuey import (
    Job,
    JobContext,
    JobFailedError,
    MemoryBackend,
    Producer,
    Queue,
    QueueSet,
    ResultTimeoutError,
    Worker,
)


# --8<-- [start:declare]
class Thumb(BaseModel):
    url: str
    width: int


class Media(QueueSet, prefix="media"):
    images = Queue()


class Resize(Job[Media, Thumb], queue=Media.images):  # its handler returns a Thumb
    url: str
    width: int


# --8<-- [end:declare]


def make_worker(backend: MemoryBackend) -> Worker[Media]:
    # --8<-- [start:handler]
    worker = Worker(Media, backend)

    @worker.handler(Resize)
    async def resize(job: Resize, ctx: JobContext) -> Thumb:  # mypy checks the return type
        if job.width <= 0:
            raise ValueError(f"width must be positive, got {job.width}")
        for row in range(0, 100, 25):
            ctx.progress(row, total=100, note="resizing")  # no round trip per call
        return Thumb(url=f"{job.url}?w={job.width}", width=job.width)

    # --8<-- [end:handler]
    return worker


async def main() -> None:
    backend = MemoryBackend()  # or a PostgresBackend
    worker = make_worker(backend)
    running = asyncio.create_task(worker.run())
    # --8<-- [start:await]
    producer = await Producer.create(Media, backend)
    handle = await producer.enqueue(Resize(url="/cat.png", width=64))  # a JobHandle[Thumb]
    thumb = await handle.result(timeout="30s")  # a Thumb
    print(thumb.url)  # /cat.png?w=64

    # Another process (or a later request) with only the id:
    again = await producer.result(handle.job_id, Thumb, timeout="30s")
    assert again == thumb

    failing = await producer.enqueue(Resize(url="/dog.png", width=0))
    try:
        await failing.result(timeout="30s")
    except JobFailedError as exc:  # dead-lettered (or cancelled): its id, state and last error
        print(exc.state, exc.last_error)
        # failed max attempts (1) exhausted after attempt 1: width must be positive, got 0
    # --8<-- [end:await]
    assert thumb == Thumb(url="/cat.png?w=64", width=64)
    dead = await producer.job(failing.job_id)
    assert dead is not None and dead.last_error == (
        "max attempts (1) exhausted after attempt 1: width must be positive, got 0"
    )
    info = await producer.job(handle.job_id)
    assert info is not None and info.result == {"url": "/cat.png?w=64", "width": 64}
    assert info.progress is not None and info.progress.done == 75
    later = await producer.enqueue_after(Resize(url="/owl.png", width=8), "1h")
    try:
        await later.result(timeout="1s")
    except ResultTimeoutError:
        pass  # the job is left alone: it runs in an hour
    worker.shutdown()
    await running


if __name__ == "__main__":
    asyncio.run(main())
