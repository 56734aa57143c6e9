"""Cases that ``mypy --strict`` must reject. Each offending line ends with ``# error: <code>``;
``tests/unit/test_typing.py`` runs mypy on this file and checks exactly those lines fail."""

from typing import assert_type

from queuey import Job, JobContext, MemoryBackend, Producer, Queue, QueueSet, Worker, sync


class Mine(QueueSet, prefix="mine"):
    work = Queue()


class Theirs(QueueSet, prefix="theirs"):
    work = Queue()


class MyJob(Job[Mine], queue=Mine.work):
    n: int


class TheirJob(Job[Theirs], queue=Theirs.work):
    n: int


async def enqueue_foreign_job() -> None:
    producer = await Producer.create(Mine, MemoryBackend())
    await producer.enqueue(MyJob(n=1))
    await producer.enqueue(TheirJob(n=1))  # error: arg-type
    await producer.enqueue_many([TheirJob(n=1)])  # error: list-item


def sync_enqueue_foreign_job() -> None:
    producer = sync.Producer.create(Mine, sync.ThreadedBackend(MemoryBackend()))
    assert_type(producer, sync.Producer[Mine])
    assert_type(producer.enqueue(MyJob(n=1), priority=3), str)
    producer.enqueue(TheirJob(n=1))  # error: arg-type
    producer.enqueue_after(TheirJob(n=1), "1s")  # error: arg-type
    producer.defer(TheirJob(n=1), "1s")  # error: arg-type
    producer.enqueue_many([TheirJob(n=1)])  # error: list-item
    producer.enqueue(MyJob(n=1), priority="high")  # error: arg-type


def sync_backends_are_not_async_ones() -> None:
    sync.Producer.create(Mine, MemoryBackend())  # error: arg-type


async def async_producer_takes_no_sync_backend() -> None:
    backend = sync.PostgresBackend("postgresql://")
    await Producer.create(Mine, backend)  # error: arg-type


def register_foreign_handler() -> None:
    worker = Worker(Mine, MemoryBackend())

    @worker.handler(MyJob)
    async def mine(job: MyJob, ctx: JobContext) -> None: ...

    @worker.handler(TheirJob)  # error: arg-type
    async def theirs(job: TheirJob, ctx: JobContext) -> None: ...


def queue_options_are_checked() -> None:
    Queue(prefetch="ten")  # error: arg-type
    Queue(colour="red")  # error: arg-type
