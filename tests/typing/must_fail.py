"""Cases that ``mypy --strict`` must reject. Each offending line ends with ``# error: <code>``;
``tests/unit/test_typing.py`` runs mypy on this file and checks exactly those lines fail."""

from queuey import Job, JobContext, MemoryBackend, Producer, Queue, QueueSet, Worker


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


def register_foreign_handler() -> None:
    worker = Worker(Mine, MemoryBackend())

    @worker.handler(MyJob)
    async def mine(job: MyJob, ctx: JobContext) -> None: ...

    @worker.handler(TheirJob)  # error: arg-type
    async def theirs(job: TheirJob, ctx: JobContext) -> None: ...


def queue_options_are_checked() -> None:
    Queue(prefetch="ten")  # error: arg-type
    Queue(colour="red")  # error: arg-type
