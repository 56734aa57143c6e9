"""An operator's retry of a failed workflow step lets the workflow continue (PostgreSQL): the
steps that failed only because it did wait again, get the results their other parents already
gave, and run once it succeeds (checked from the handlers' own records). A step with another
failed parent stays failed, and a ``then_partial`` fan-in that already ran with the failure is
not run again. The dashboard's Retry re-arms alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from queuey import Job, JobContext, JobFailedError, Producer, Worker
from queuey.backends.postgres import Admin, PgDashboardStore, PostgresBackend
from queuey.workflows import chain, group
from tests.integration.postgres.workflow_app import Count, Double, FlowQueues, Sum, register

pytestmark = pytest.mark.postgres


class Flaky(Job[FlowQueues, int], queue=FlowQueues.steps, name="flows.Flaky"):
    """Fails while its text is in the test's broken set, then counts its text."""

    text: str
    sleep_ms: int = 0


@asynccontextmanager
async def running(
    url: str, schema: str, broken: set[str], runs: list[tuple[str, str]]
) -> AsyncIterator[Producer[FlowQueues]]:
    async def record(kind: str, key: str) -> None:
        runs.append((kind, key))

    async with PostgresBackend(url, schema=schema, poll_interval="200ms") as backend:
        producer = await Producer.create(FlowQueues, backend)
        worker = Worker(FlowQueues, backend, concurrency=8)
        register(worker, record)

        @worker.handler(Flaky)
        async def flaky(job: Flaky, ctx: JobContext) -> int:
            runs.append(("flaky", job.text))
            await asyncio.sleep(job.sleep_ms / 1000)
            if job.text in broken:
                raise ValueError(f"{job.text} is broken")
            return len(job.text)

        task = asyncio.create_task(worker.run())
        try:
            yield producer
        finally:
            worker.shutdown()
            await task


async def _state(producer: Producer[FlowQueues], job_id: str, state: str) -> None:
    for _ in range(600):  # 60 s: generous on a loaded machine
        info = await producer.job(job_id)
        if info is not None and info.state == state:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} never reached {state}: {info}")


async def test_retrying_a_failed_step_lets_its_workflow_finish(
    database_url: str, pg_schema: str
) -> None:
    broken = {"ab", "x", "q", "y"}
    runs: list[tuple[str, str]] = []
    admin = Admin(database_url, schema=pg_schema)
    async with running(database_url, pg_schema, broken, runs) as producer:
        # A fan-in under "then" and the chain link after it fail with the broken member.
        fan_in = group(Flaky(text="ab"), Count(text="abc", key="member")).then(Sum.from_counts)
        flow = chain(fan_in, Double.from_count)
        handle = await producer.enqueue_workflow(flow)
        flaky_id, _, sum_id, _ = (node.job_id for node in flow.nodes)
        # A fan-in whose second member failed for its own reason (later: the fan-in's error
        # names the first) stays failed.
        other = group(Flaky(text="x"), Flaky(text="y", sleep_ms=300)).then(Sum.from_counts)
        blocked = await producer.enqueue_workflow(other)
        # A then_partial fan-in runs with the failure and is not run again.
        some = group(Flaky(text="q"), Count(text="abcd", key="p")).then_partial(Sum.from_some)
        partial = await producer.enqueue_workflow(some)
        with pytest.raises(JobFailedError, match="is broken"):
            await handle.result(timeout=30)
        with pytest.raises(JobFailedError):
            await blocked.result(timeout=30)
        assert await partial.result(timeout=30) == 4
        await _state(producer, sum_id, "failed")
        await _state(producer, other.nodes[1].job_id, "failed")
        first = await producer.job(blocked)
        assert first is not None and f"step {other.nodes[0].job_id} failed" in str(first.last_error)
        broken.clear()
        broken.add("y")
        assert [t.count for t in await admin.retry(flaky_id)] == [1]
        info = await producer.workflow(handle)
        assert info is not None and info.steps[2].state in ("waiting", "pending", "running", "done")
        assert await handle.result(timeout=30) == 2 * (2 + 3)
        for step in (other.nodes[0].job_id, some.nodes[0].job_id):
            assert len(await admin.retry(step)) == 1
        await _state(producer, some.nodes[0].job_id, "done")
        await _state(producer, other.nodes[0].job_id, "done")
        await asyncio.sleep(0.5)  # time enough for a wrongly re-armed step to run
        blocked_info = await producer.job(blocked)
        assert blocked_info is not None and blocked_info.state == "failed"
    sums = [key.split("|")[1] for kind, key in runs if kind == "sum"]
    assert sums == ["2", "2"]  # the partial fan-in once, the retried fan-in once (2 members)
    assert [key for kind, key in runs if kind == "count"].count("member") == 1  # not rerun
    assert runs.count(("flaky", "ab")) == 2


async def test_the_dashboards_retry_rearms_alike(database_url: str, pg_schema: str) -> None:
    broken = {"ab"}
    runs: list[tuple[str, str]] = []
    async with running(database_url, pg_schema, broken, runs) as producer:
        flow = chain(Flaky(text="ab"), Double.from_count, Double.from_count)
        handle = await producer.enqueue_workflow(flow)
        with pytest.raises(JobFailedError, match=f"step {flow.nodes[0].job_id} failed"):
            await handle.result(timeout=30)
        broken.clear()
        store = PgDashboardStore(database_url, schema=pg_schema)
        try:
            assert await store.retry("someone", job_id=flow.nodes[0].job_id) == 1
        finally:
            await store.close()
        assert await handle.result(timeout=30) == 8
