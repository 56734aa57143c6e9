"""Concepts: a queue set, its queues, and jobs bound to them (in memory)."""

from __future__ import annotations

import asyncio

from queuey import Job, MemoryBackend, Producer, Queue, QueueSet, RetryPolicy


# --8<-- [start:declare]
class AppQueues(QueueSet, prefix="myapp"):
    emails = Queue(prefetch=10)  # broker name "myapp.emails"
    images = Queue(retry=RetryPolicy.exponential(max_attempts=3, base="1s", max="2m"))
    resize = Queue(name="img", message_ttl="30s", max_priority=0)  # "myapp.img"


class SendEmail(
    Job[AppQueues],
    queue=AppQueues.emails,
    name="myapp.SendEmail",  # the job's identity on the wire (default: module.QualName)
    retry=RetryPolicy.exponential(max_attempts=5),  # beats the queue's policy
):
    to: str
    body: str


class ResizeImage(Job[AppQueues], queue=AppQueues.resize):
    path: str
    width: int = 640


# --8<-- [end:declare]


async def main() -> None:
    # --8<-- [start:enqueue]
    backend = MemoryBackend()
    producer = await Producer.create(AppQueues, backend)  # declares every queue of the set
    job_id = await producer.enqueue(SendEmail(to="ada@example.com", body="hi"))
    await producer.enqueue_after(SendEmail(to="grace@example.com", body="later"), "30s")
    await producer.enqueue(ResizeImage(path="cat.png"), priority=0)
    await producer.enqueue_many(
        [SendEmail(to=f"user{n}@example.com", body="news") for n in range(3)]
    )

    info = await producer.job(job_id)
    assert info is not None and info.state == "pending"
    print(backend.queue_names())  # ['myapp.emails', 'myapp.images', 'myapp.img']
    # --8<-- [end:enqueue]
    assert backend.queue_names() == ["myapp.emails", "myapp.images", "myapp.img"]
    assert backend.pending("myapp.emails") == 4 and backend.delayed("myapp.emails") == 1


if __name__ == "__main__":
    asyncio.run(main())
