"""Operating on workflows alike on PostgreSQL and in memory: a workflow shows each step's
state and parents, lists newest first, and cancelling it ends its pending and waiting steps
at once and tells its running step, which ends cancelled; the steps that ended stay."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from queuey import Job, JobContext, JobFailedError, Producer, Worker
from queuey.backends.base import Backend
from queuey.backends.workflow_ops import WorkflowCancel, WorkflowOps, WorkflowStep
from queuey.workflows import FanOut, chain, group, start
from tests.integration.postgres.workflow_app import Count, Double, FlowQueues, Sum, register


async def test_a_workflow_shows_lists_and_cancels_before_it_runs(backend: Backend) -> None:
    if not isinstance(backend, WorkflowOps):
        pytest.skip("the backend runs no workflows")
    producer = await Producer.create(FlowQueues, backend)
    first = await producer.enqueue_workflow(chain(Count(text="a"), Double.from_count))
    await asyncio.sleep(0.01)  # enqueued a later millisecond: listed first
    flow = chain(
        group(Count(text="ab"), Count(text="abc")).then(Sum.from_counts), Double.from_count
    )
    handle = await producer.enqueue_workflow(flow)
    ids = [node.job_id for node in flow.nodes]
    info = await producer.workflow(handle)  # by a step's job id
    assert info is not None and info.workflow_id == handle.workflow_id
    assert [(s.job_id, s.state, s.parents) for s in info.steps] == [
        (ids[0], "pending", ()),
        (ids[1], "pending", ()),
        (ids[2], "waiting", (ids[0], ids[1])),
        (ids[3], "waiting", (ids[2],)),
    ]
    assert info.steps[2].job_type == "flows.Sum" and info.state == "running"
    listed = await backend.workflows(limit=10)
    assert [w.workflow_id for w in listed] == [handle.workflow_id, first.workflow_id]
    assert listed[0].last_step == "flows.Double" and listed[0].state == "running"
    assert dict(listed[0].counts) == {"pending": 2, "waiting": 2}
    assert [w.workflow_id for w in await backend.workflows(limit=1)] == [handle.workflow_id]
    assert handle.workflow_id is not None
    assert await producer.cancel_workflow(handle.workflow_id) == WorkflowCancel(4, 0)
    assert await producer.cancel_workflow(handle.workflow_id) == WorkflowCancel(0, 0)
    ended = await producer.workflow(handle.workflow_id)
    assert ended is not None and ended.state == "cancelled"
    assert [s.state for s in ended.steps] == ["cancelled"] * 4
    with pytest.raises(JobFailedError):
        await handle.result(timeout=5)
    assert await producer.workflow(first.workflow_id or "") is not None  # the other: untouched
    assert (await producer.job(first)) is not None
    assert (await producer.job(first)).state == "waiting"  # type: ignore[union-attr]


async def test_cancelling_a_workflow_tells_its_running_step(backend: Backend) -> None:
    if not isinstance(backend, WorkflowOps):
        pytest.skip("the backend runs no workflows")
    producer = await Producer.create(FlowQueues, backend)
    ran: list[tuple[str, str]] = []

    async def record(kind: str, key: str) -> None:
        ran.append((kind, key))

    slow, quick = Count(text="slow", sleep_ms=60_000), Count(text="ab", key="quick")
    flow = chain(group(slow, quick).then(Sum.from_counts), Double.from_count)
    handle = await producer.enqueue_workflow(flow)
    worker = Worker(FlowQueues, backend, concurrency=4, cancel_grace="1s")
    register(worker, record)
    running = asyncio.create_task(worker.run())
    try:
        await _until(producer, flow.nodes[0].job_id, "running")
        await _until(producer, flow.nodes[1].job_id, "done")
        assert await producer.cancel_workflow(flow.nodes[1].job_id) == WorkflowCancel(2, 1)
        await _until(producer, flow.nodes[0].job_id, "cancelled")
    finally:
        worker.shutdown()
        await running
    info = await producer.workflow(handle)
    assert info is not None and info.state == "cancelled"
    assert [s.state for s in info.steps] == ["cancelled", "done", "cancelled", "cancelled"]
    assert ran == [("count", "quick")]  # the handlers' own records: Sum never ran


async def _until(producer: Producer[FlowQueues], job_id: str, state: str) -> None:
    for _ in range(600):  # 60 s: generous on a loaded machine
        info = await producer.job(job_id)
        if info is not None and info.state == state:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} never reached {state}: {info}")


class Split(Job[FlowQueues, FanOut[int]], queue=FlowQueues.steps, name="flows.SplitShown"):
    text: str


async def split_and_sum(producer: Producer[Any], worker: Worker[Any], split: Any) -> Any:
    """Run ``split`` (a job fanning its ``text``'s words out to ``Count``) then ``Sum`` of
    their counts on ``worker`` until the workflow's result, 3 for "a bb"; its handle."""

    async def record(kind: str, key: str) -> None:
        return None

    register(worker, record)

    @worker.handler(split)
    async def fan_out(job: Any, ctx: JobContext) -> FanOut[int]:
        return FanOut(Count(text=part) for part in job.text.split(" "))

    running = asyncio.create_task(worker.run())
    try:
        flow = start(split(text="a bb")).then_each(Sum.from_counts)
        handle = await producer.enqueue_workflow(flow)
        assert await handle.result(timeout=30) == 3
    finally:
        worker.shutdown()
        await running
    return handle


async def test_jobs_a_step_fans_out_to_are_shown_after_it(backend: Backend) -> None:
    if not isinstance(backend, WorkflowOps):
        pytest.skip("the backend runs no workflows")
    producer = await Producer.create(FlowQueues, backend)
    worker = Worker(FlowQueues, backend, concurrency=4)

    handle = await split_and_sum(producer, worker, Split)
    info = await producer.workflow(handle)
    assert info is not None and info.state == "done"
    by_type: dict[str, list[WorkflowStep]] = {}
    for step in info.steps:
        by_type.setdefault(step.job_type, []).append(step)
    (first,) = by_type["flows.SplitShown"]
    added = by_type["flows.Count"]
    (total,) = by_type["flows.Sum"]
    assert [s.parents for s in added] == [(first.job_id,), (first.job_id,)]
    assert sorted(total.parents) == sorted(s.job_id for s in added)
