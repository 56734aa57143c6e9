"""Results on the memory backend in virtual time: an hour of waiting for a delayed job, and a
timeout of a day, pass in no wall time; the sync twin waits through ``ThreadedBackend``."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from queuey import (
    Job,
    JobContext,
    JobInfo,
    MemoryBackend,
    NotSupportedError,
    Producer,
    Progress,
    Queue,
    QueueSet,
    ResultTimeoutError,
    Worker,
    sync,
)


class Total(BaseModel):
    sum: int


class SumQueues(QueueSet, prefix="sums"):
    work = Queue()


class Add(Job[SumQueues, Total], queue=SumQueues.work, name="sums.Add"):
    numbers: list[int]


@pytest.mark.looptime
async def test_an_hour_of_waiting_and_a_days_timeout_pass_in_no_wall_time() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(SumQueues, backend)
    worker = Worker(SumQueues, backend)

    @worker.handler(Add)
    async def add(job: Add, ctx: JobContext) -> Total:
        return Total(sum=sum(job.numbers))

    wall = time.monotonic()
    running = asyncio.create_task(worker.run())
    later = await producer.enqueue_after(Add(numbers=[1, 2, 3]), "1h")
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await later.result(timeout="2h") == Total(sum=6)
    assert 3600 <= loop.time() - began < 3700
    never = await producer.enqueue_after(Add(numbers=[1]), "3d")
    with pytest.raises(ResultTimeoutError):
        await never.result(timeout="1d")
    assert 86400 <= loop.time() - began - 3600 < 86500
    worker.shutdown()
    await running
    assert time.monotonic() - wall < 5.0
    await backend.close()


def test_the_sync_producer_blocks_for_a_result_on_a_threaded_backend() -> None:
    backend = MemoryBackend()
    with sync.ThreadedBackend(backend) as threaded:
        producer = sync.Producer.create(SumQueues, threaded)
        handle = producer.enqueue(Add(numbers=[4, 5]))
        worker = Worker(SumQueues, backend)

        @worker.handler(Add)
        def add(job: Add, ctx: JobContext) -> Total:
            return Total(sum=sum(job.numbers))

        with pytest.raises(ResultTimeoutError):
            handle.result(timeout=0.2)
        loop = threaded.loop_for_waiting()
        running = asyncio.run_coroutine_threadsafe(worker.run(), loop)
        assert handle.result(timeout=10) == Total(sum=9)
        assert producer.result(handle, Total, timeout=1) == Total(sum=9)
        loop.call_soon_threadsafe(worker.shutdown)
        running.result(10)


def test_the_sync_postgres_backend_refuses_a_job_with_a_result() -> None:
    backend = sync.PostgresBackend("postgresql://127.0.0.1:1/none")
    producer = sync.Producer.undeclared(SumQueues, backend)
    with pytest.raises(NotSupportedError, match="declares a result type"):
        producer.enqueue(Add(numbers=[1]))


def test_jobs_show_prints_the_progress_and_the_result() -> None:
    from queuey.cli._jobs import job_json, job_text

    info = JobInfo(
        id="5f1c1f7e-0000-4000-8000-000000000000",
        kind="job",
        queue="sums.work",
        job_type="sums.Add",
        state="done",
        attempts=1,
        redeliveries=0,
        deferrals=0,
        priority=0,
        due_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        last_error=None,
        payload={"numbers": [1, 2]},
        result={"sum": 3},
        progress=Progress(0.4, 4, 10, "rows"),
    )
    text = job_text(info).splitlines()
    assert "progress      40% (4/10): rows" in text
    assert text[text.index("result:") + 1 :][:3] == ["{", '  "sum": 3', "}"]
    document = job_json(info)
    assert document["result"] == {"sum": 3}
    assert document["progress"] == {"fraction": 0.4, "done": 4, "total": 10, "note": "rows"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((1.5,), "within 0..1"),
        ((float("nan"),), "a fraction 0..1 or a count"),
        ((11,), "within 0..1"),
        ((11, 10), "0..10"),
        ((2.5, 10), "0..10"),
        ((1, 0), "total must be"),
    ],
)
def test_a_bad_progress_report_names_what_is_wrong(args: tuple[float, ...], message: str) -> None:
    from queuey.progress import progress_of

    with pytest.raises(ValueError, match=message):
        progress_of(*args)  # type: ignore[arg-type]
    assert progress_of(3, 4, "x" * 500) == Progress(0.75, 3, 4, "x" * 200)
