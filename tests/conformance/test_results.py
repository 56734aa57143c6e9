"""Typed results (``Job[Set, Result]``): a handler's return value is validated into the job's
result type, stored with its completion and awaited by the caller (``handle.result()``,
``producer.result(id, type)``) the same way on PostgreSQL and in memory; RabbitMQ refuses such
a job with ``NotSupportedError`` before anything is sent."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel, Field, TypeAdapter

from queuey import (
    Fatal,
    Job,
    JobContext,
    JobFailedError,
    JobHandle,
    NotSupportedError,
    Producer,
    Progress,
    Queue,
    QueueSet,
    ResultError,
    ResultTimeoutError,
    RetryPolicy,
    Unique,
    UnknownJobError,
    Worker,
)
from queuey.backends.base import Backend
from tests.helpers import run_until


class Thumb(BaseModel):
    url: str
    width: int


@dataclass
class Kit:
    queues: type[QueueSet]
    Resize: Any
    Plain: Any


def make_kit() -> Kit:
    prefix = f"r{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        images = Queue(prefetch=8, retry=RetryPolicy.fixed(2, "50ms"))

    class Resize(Job[Queues, Thumb], queue=Queues.images, name=f"{prefix}.Resize"):
        url: str
        width: Any = 64
        fail: str = ""

    class Plain(Job[Queues], queue=Queues.images, name=f"{prefix}.Plain"):
        n: int = 0

    return Kit(Queues, Resize, Plain)


def rabbitmq(backend: Backend) -> bool:
    return type(backend).__name__ == "RabbitMqBackend"


def worker_for(kit: Kit, backend: Backend, seen: list[str]) -> Worker[Any]:
    worker: Worker[Any] = Worker(kit.queues, backend)

    @worker.handler(kit.Resize)
    async def resize(job: Any, ctx: JobContext) -> Any:
        seen.append(job.url)
        if job.fail == "fatal":
            raise Fatal("no such image")
        return {"url": job.url + "?thumb", "width": job.width}

    @worker.handler(kit.Plain)
    async def plain(job: Any, ctx: JobContext) -> int:
        return int(job.n)  # a job without a result type: its return value is ignored

    return worker


def ended(worker: Worker[Any]) -> int:
    return sum(s.succeeded + s.dead for s in worker.stats.values())


async def test_a_result_is_awaited_typed_before_and_after_the_job_ends(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    if rabbitmq(backend):
        with pytest.raises(NotSupportedError, match="declares a result type"):
            await producer.enqueue(kit.Resize(url="a"))
        with pytest.raises(NotSupportedError, match="keeps no per-job state"):
            await producer.result(str(uuid.uuid4()), Thumb)
        return
    seen: list[str] = []
    handle = await producer.enqueue(kit.Resize(url="a", width=80))
    assert isinstance(handle, JobHandle) and isinstance(handle, str)
    plain_id = await producer.enqueue(kit.Plain(n=3))
    assert type(plain_id).__name__ == "EnqueueResult"  # no handle, no cost: as before
    waiting = asyncio.create_task(handle.result(timeout=30))  # waits before the job runs
    other = asyncio.create_task(producer.result(handle.job_id, Thumb, timeout=30))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    worker = worker_for(kit, backend, seen)
    await run_until(worker, lambda: ended(worker) == 2)
    thumb = await waiting
    assert thumb == Thumb(url="a?thumb", width=80)
    assert await other == thumb
    # After the job ended (before retention deletes it): read at once, from any id holder.
    assert await producer.result(handle.job_id, Thumb, timeout=0.5) == thumb
    assert await producer.result(handle.job_id, dict[str, Any]) == {"url": "a?thumb", "width": 80}
    info = await producer.job(handle.job_id)
    assert info is not None and info.state == "done"
    assert info.result == {"url": "a?thumb", "width": 80}
    plain_info = await producer.job(plain_id)
    assert plain_info is not None and plain_info.result is None


async def test_a_wrong_return_value_fails_the_attempt_naming_the_field(backend: Backend) -> None:
    kit = make_kit()
    if rabbitmq(backend):
        return
    producer = await Producer.create(kit.queues, backend)
    handle = await producer.enqueue(kit.Resize(url="b", width="wide"))
    worker = worker_for(kit, backend, [])
    await run_until(worker, lambda: ended(worker) == 1)
    with pytest.raises(JobFailedError) as caught:
        await handle.result(timeout=5)
    failure = caught.value
    assert (failure.job_id, failure.state) == (handle.job_id, "failed")
    assert failure.last_error is not None
    assert "result of" in failure.last_error and "Resize" in failure.last_error
    assert "width" in failure.last_error and "Thumb" in failure.last_error
    assert failure.last_error.endswith(
        "is not a valid Thumb: width: Input should be a valid integer, unable to parse string "
        "as an integer (got str)"
    ), failure.last_error  # the type of the field's value, not of the whole return value
    info = await producer.job(handle.job_id)
    assert info is not None and info.attempts == 2  # a failed attempt, retried by the policy


async def test_a_result_holding_a_nul_character_fails_the_attempt_on_every_backend(
    backend: Backend,
) -> None:
    """PostgreSQL stores results as jsonb, which cannot hold U+0000: every backend refuses such
    a result alike, as a failed attempt naming it (not a success that cannot be recorded)."""
    kit = make_kit()
    if rabbitmq(backend):
        return
    producer = await Producer.create(kit.queues, backend)
    handle = await producer.enqueue(kit.Resize(url="a\x00b"))  # a payload may hold it
    worker = worker_for(kit, backend, [])
    await run_until(worker, lambda: ended(worker) == 1)
    with pytest.raises(JobFailedError) as caught:
        await handle.result(timeout=5)
    assert caught.value.last_error is not None
    assert "NUL character" in caught.value.last_error and "Resize" in caught.value.last_error
    info = await producer.job(handle.job_id)
    assert info is not None and info.attempts == 2  # failed attempts, retried by the policy


async def test_a_dead_letter_or_a_cancel_raises_with_the_state_and_error(
    backend: Backend,
) -> None:
    kit = make_kit()
    if rabbitmq(backend):
        return
    producer = await Producer.create(kit.queues, backend)
    dead = await producer.enqueue(kit.Resize(url="c", fail="fatal"))
    later = await producer.enqueue_after(kit.Resize(url="d"), "1h")
    waiting_dead = asyncio.create_task(dead.result(timeout=30))
    waiting_cancel = asyncio.create_task(later.result(timeout=30))
    await asyncio.sleep(0.05)
    assert await producer.cancel(later.job_id) == "cancelled"
    with pytest.raises(JobFailedError) as cancelled:
        await waiting_cancel
    assert (cancelled.value.job_id, cancelled.value.state) == (later.job_id, "cancelled")
    worker = worker_for(kit, backend, [])
    await run_until(worker, lambda: ended(worker) == 1)
    with pytest.raises(JobFailedError) as failed:
        await waiting_dead
    assert (failed.value.state, failed.value.job_id) == ("failed", dead.job_id)
    assert "no such image" in (failed.value.last_error or "")


async def test_a_timeout_leaves_the_job_alone_and_an_unknown_id_is_refused(
    backend: Backend,
) -> None:
    kit = make_kit()
    if rabbitmq(backend):
        return
    producer = await Producer.create(kit.queues, backend)
    handle = await producer.enqueue(kit.Resize(url="e"))
    with pytest.raises(ResultTimeoutError) as caught:
        await handle.result(timeout="200ms")
    assert isinstance(caught.value, TimeoutError) and caught.value.job_id == handle.job_id
    info = await producer.job(handle.job_id)
    assert info is not None and info.state == "pending"
    with pytest.raises(UnknownJobError):
        await producer.result(str(uuid.uuid4()), Thumb, timeout=5)
    worker = worker_for(kit, backend, [])
    await run_until(worker, lambda: ended(worker) == 1)
    assert (await handle.result(timeout=5)).url == "e?thumb"


async def test_progress_reported_by_a_handler_is_read_while_it_runs(backend: Backend) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    if rabbitmq(backend):
        return
    worker: Worker[Any] = Worker(kit.queues, backend)
    release = asyncio.Event()

    @worker.handler(kit.Resize)
    async def resize(job: Any, ctx: JobContext) -> Any:
        for done in range(1, 4):
            ctx.progress(done, total=10, note=f"step {done}")  # no round trip: the last wins
        await release.wait()
        ctx.progress(1.0)
        return {"url": job.url, "width": 1}

    handle = await producer.enqueue(kit.Resize(url="p"))
    assert await handle.progress() is None
    running = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(15):
            while (progress := await handle.progress()) is None:
                await asyncio.sleep(0.05)
        assert progress == Progress(0.3, 3, 10, "step 3")
        info = await producer.job(handle.job_id)
        assert info is not None and info.state == "running" and info.progress == progress
        release.set()
        assert (await handle.result(timeout=15)).url == "p"
    finally:
        release.set()
        worker.shutdown()
        await running
    info = await producer.job(handle.job_id)
    assert info is not None and info.progress is not None
    assert info.progress.fraction in (0.3, 1.0)  # the last report may end with the run


async def test_a_refused_duplicates_handle_waits_for_the_job_holding_the_key(
    backend: Backend,
) -> None:
    if rabbitmq(backend):
        return
    prefix = f"u{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        work = Queue()

    class Once(Job[Queues, int], queue=Queues.work, name=f"{prefix}.Once", unique=Unique()):
        n: int

    producer = await Producer.create(Queues, backend)
    first = await producer.enqueue(Once(n=1))
    again = await producer.enqueue(Once(n=2))
    assert isinstance(again, JobHandle) and again == first
    assert (first.outcome, again.outcome, again.inserted) == ("inserted", "skipped", False)
    worker: Worker[Any] = Worker(Queues, backend)

    @worker.handler(Once)
    async def once(job: Once, ctx: JobContext) -> int:
        return job.n * 10

    await run_until(worker, lambda: ended(worker) == 1)
    assert await again.result(timeout=10) == 10


class Hidden(BaseModel):
    url: str
    secret: str = Field(exclude=True)  # required, but left out of the dump


class Sized(BaseModel):
    url: str
    width: int


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic's serializer warns about NaN
@pytest.mark.parametrize("case", ["excluded-field", "unvalidated-nan"])
async def test_a_result_whose_json_does_not_read_back_fails_the_attempt(
    backend: Backend, case: str
) -> None:
    if rabbitmq(backend):
        return
    prefix = f"x{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        work = Queue(retry=RetryPolicy.fixed(2, "50ms"))

    class MakeHidden(Job[Queues, Hidden], queue=Queues.work, name=f"{prefix}.MakeHidden"):
        pass

    class MakeSized(Job[Queues, Sized], queue=Queues.work, name=f"{prefix}.MakeSized"):
        pass

    worker: Worker[Any] = Worker(Queues, backend)

    @worker.handler(MakeHidden)
    async def hidden(job: MakeHidden, ctx: JobContext) -> Hidden:
        return Hidden(url="a", secret="s")

    @worker.handler(MakeSized)
    async def sized(job: MakeSized, ctx: JobContext) -> Sized:
        return Sized(url="a", width=1).model_copy(update={"width": float("nan")})

    producer = await Producer.create(Queues, backend)
    job = MakeHidden() if case == "excluded-field" else MakeSized()
    handle = await producer.enqueue(job)
    await run_until(worker, lambda: ended(worker) == 1)
    with pytest.raises(JobFailedError) as caught:  # never done with a result no one can read
        await handle.result(timeout=5)
    error = caught.value.last_error or ""
    assert caught.value.state == "failed" and type(job).__name__ in error, error
    assert ("secret" if case == "excluded-field" else "width") in error, error
    info = await producer.job(handle.job_id)
    assert info is not None and info.attempts == 2  # failed attempts, retried by the policy


async def test_a_stored_result_read_as_another_type_raises_a_result_error(
    backend: Backend,
) -> None:
    kit = make_kit()
    if rabbitmq(backend):
        return
    producer = await Producer.create(kit.queues, backend)
    handle = await producer.enqueue(kit.Resize(url="w", width=7))
    worker = worker_for(kit, backend, [])
    await run_until(worker, lambda: ended(worker) == 1)
    assert await handle.result(timeout=5) == Thumb(url="w?thumb", width=7)
    with pytest.raises(ResultError) as caught:  # not pydantic's ValidationError
        await producer.result(handle.job_id, int, timeout=5)
    assert caught.value.job_id == handle.job_id
    assert handle.job_id in str(caught.value) and "does not read as" in str(caught.value)
    wrong: JobHandle[int] = JobHandle(handle.job_id, backend, TypeAdapter(int))
    with pytest.raises(ResultError) as again:
        await wrong.result(timeout=5)
    assert again.value.job_id == handle.job_id
