"""Cases that ``mypy --strict`` must reject. Each offending line ends with ``# error: <code>``;
``tests/unit/test_typing.py`` runs mypy on this file and checks exactly those lines fail."""

from typing import assert_type

from pydantic import BaseModel

from queuey import (
    BatchContext,
    EnqueueResult,
    Job,
    JobContext,
    JobHandle,
    MemoryBackend,
    Producer,
    Queue,
    QueueSet,
    Worker,
    sync,
)
from queuey.batches import BatchProgress, batch
from queuey.workflows import FanOut, StepFailed, Workflow, chain, group, start


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
    assert_type(producer.enqueue(MyJob(n=1), priority=3), EnqueueResult)
    producer.enqueue(TheirJob(n=1))  # error: arg-type
    producer.enqueue_after(TheirJob(n=1), "1s")  # error: arg-type
    producer.defer(TheirJob(n=1), "1s")  # error: arg-type
    producer.enqueue_many([TheirJob(n=1)])  # error: list-item
    producer.enqueue(MyJob(n=1), priority="high")  # error: call-overload


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


class Thumb(BaseModel):
    url: str


class Resize(Job[Mine, Thumb], queue=Mine.work):
    url: str


class TheirResize(Job[Theirs, Thumb], queue=Theirs.work):
    url: str


def register_handlers_of_a_job_with_a_result() -> None:
    worker = Worker(Mine, MemoryBackend())

    @worker.handler(Resize)
    async def right(job: Resize, ctx: JobContext) -> Thumb:
        return Thumb(url=job.url)

    @worker.handler(Resize)
    def right_sync(job: Resize, ctx: JobContext) -> Thumb:
        return Thumb(url=job.url)

    @worker.handler(Resize)  # error: arg-type
    async def wrong(job: Resize, ctx: JobContext) -> str:
        return job.url

    @worker.handler(Resize)  # error: arg-type
    def wrong_sync(job: Resize, ctx: JobContext) -> int:
        return 1

    @worker.handler(Resize)  # error: arg-type
    async def returns_nothing(job: Resize, ctx: JobContext) -> None: ...

    @worker.handler(TheirResize)  # error: arg-type
    async def foreign(job: TheirResize, ctx: JobContext) -> Thumb:
        return Thumb(url=job.url)


async def await_a_typed_result() -> None:
    producer = await Producer.create(Mine, MemoryBackend())
    handle = await producer.enqueue(Resize(url="a"))
    assert_type(handle, JobHandle[Thumb])
    assert_type(await producer.enqueue(MyJob(n=1)), EnqueueResult)
    thumb = await handle.result(timeout="5s")
    assert_type(thumb, Thumb)
    assert_type(await producer.result(handle, Thumb), Thumb)
    width: int = await handle.result()  # error: assignment
    print(width)
    await producer.enqueue(TheirResize(url="a"))  # error: arg-type


def sync_result_is_typed() -> None:
    producer = sync.Producer.create(Mine, sync.ThreadedBackend(MemoryBackend()))
    handle = producer.enqueue(Resize(url="a"))
    assert_type(handle.result(), Thumb)
    text: str = handle.result()  # error: assignment
    print(text)


class OtherJob(Job[Mine], queue=Mine.work):
    n: int


def register_batch_handlers() -> None:
    worker = Worker(Mine, MemoryBackend())

    @worker.batch_handler(MyJob, size=10, wait="20ms")
    async def right(jobs: list[MyJob], ctx: BatchContext) -> list[BaseException | None]:
        return [None] * len(jobs)

    @worker.batch_handler(TheirJob)  # error: arg-type
    async def foreign(jobs: list[TheirJob], ctx: BatchContext) -> None: ...

    @worker.batch_handler(MyJob)  # error: arg-type
    async def wrong_element(jobs: list[OtherJob], ctx: BatchContext) -> None: ...

    @worker.batch_handler(MyJob)  # error: arg-type
    async def wrong_return(jobs: list[MyJob], ctx: BatchContext) -> list[str]:
        return []


class Page(BaseModel):
    body: str


class Fetch(Job[Mine, Page], queue=Mine.work):
    url: str


class Count(Job[Mine, int], queue=Mine.work):
    text: str

    @classmethod
    def from_page(cls, page: Page) -> "Count":
        return cls(text=page.body)

    @classmethod
    def from_thumb(cls, thumb: Thumb) -> "Count":
        return cls(text=thumb.url)


class Sum(Job[Mine, int], queue=Mine.work):
    counts: list[int]

    @classmethod
    def from_counts(cls, counts: list[int]) -> "Sum":
        return cls(counts=counts)

    @classmethod
    def from_some(cls, counts: list[int | StepFailed]) -> "Sum":
        return cls(counts=[c for c in counts if isinstance(c, int)])


async def workflows_are_typed() -> None:
    producer = await Producer.create(Mine, MemoryBackend())
    flow = chain(Fetch(url="a"), Count.from_page)
    assert_type(flow, Workflow[int])
    assert_type(await producer.enqueue_workflow(flow), JobHandle[int])
    chain(Fetch(url="a"), Count.from_thumb)  # error: arg-type
    chain(Resize(url="a"), Count.from_page)  # error: arg-type
    chain(Fetch(url="a"), Count.from_page, Sum.from_counts)  # error: misc
    fan = group(chain(Fetch(url="a"), Count.from_page), Fetch(url="b"))  # error: misc
    total = group(flow, chain(Fetch(url="b"), Count.from_page)).then(Sum.from_counts)
    assert_type(total, Workflow[int])
    group(flow, flow).then_partial(Sum.from_some)
    group(flow, flow).then(Sum.from_some)  # error: arg-type
    group(flow, flow).then_partial(Sum.from_counts)  # error: arg-type
    group(Fetch(url="a"), Fetch(url="b")).then(Sum.from_counts)  # error: arg-type
    print(fan)


class Notify(Job[Mine], queue=Mine.work):
    failed: int

    @classmethod
    def from_batch(cls, progress: BatchProgress) -> "Notify":
        return cls(failed=progress.failed)


async def batches_are_typed() -> None:
    producer = await Producer.create(Mine, MemoryBackend())
    jobs = batch(MyJob(n=1), MyJob(n=2)).on_success(Notify.from_batch)
    handle = await producer.enqueue_batch(jobs.on_complete(Notify.from_batch))
    assert_type(await handle.progress(), BatchProgress)
    batch(MyJob(n=1)).on_complete(Sum.from_counts)  # error: arg-type
    batch(MyJob(n=1)).on_success(Count.from_page)  # error: arg-type
    batch(MyJob(n=1), 3)  # error: arg-type
    await handle.add(MyJob(n=3), "x")  # error: arg-type


class Split(Job[Mine, FanOut[int]], queue=Mine.work):
    text: str


async def fan_out_is_typed() -> None:
    producer = await Producer.create(Mine, MemoryBackend())
    flow = start(Split(text="a b")).then_each(Sum.from_counts)
    assert_type(flow, Workflow[int])
    assert_type(await producer.enqueue_workflow(flow), JobHandle[int])
    start(Split(text="a b")).then_each_partial(Sum.from_some)
    start(Split(text="a b")).then_each(Sum.from_some)  # error: arg-type
    start(Split(text="a b")).then_each(Count.from_page)  # error: arg-type
    start(Fetch(url="a")).then_each(Sum.from_counts)  # error: misc
    ok: FanOut[int] = FanOut([Count(text="a")])
    bad: FanOut[int] = FanOut([Fetch(url="a")])  # error: list-item
    print(ok, bad)
