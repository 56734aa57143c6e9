"""Workflows behave alike on PostgreSQL and in memory: a chain passes each result on, a fan-in
runs once with its members' results in member order, ``then`` fails the workflow when a member
fails (downstream steps end failed without running), ``then_partial`` runs the callback with a
``StepFailed`` for a failed member chain; RabbitMQ refuses a workflow."""

from __future__ import annotations

import asyncio

import pytest

from queuey import JobFailedError, NotSupportedError, Producer, Worker
from queuey.backends.base import Backend, DepthBackend
from queuey.workflows import chain, group
from tests.integration.postgres.workflow_app import (
    Count,
    Double,
    Fetch,
    FlowQueues,
    Sum,
    register,
)


async def test_workflows_chain_fan_in_and_fail_alike(backend: Backend) -> None:
    producer = await Producer.create(FlowQueues, backend)
    if type(backend).__name__ == "RabbitMqBackend":
        with pytest.raises(NotSupportedError, match="cannot run workflows"):
            await producer.enqueue_workflow(chain(Fetch(url="a"), Count.from_page))
        return
    sums: list[str] = []

    async def record(kind: str, key: str) -> None:
        if kind == "sum":
            sums.append(key)

    worker = Worker(FlowQueues, backend, concurrency=8)
    register(worker, record)
    running = asyncio.create_task(worker.run())
    try:
        three = chain(Fetch(url="abc"), Count.from_page, Double.from_count)
        assert await (await producer.enqueue_workflow(three)).result(timeout=30) == 10
        members = [chain(Fetch(url="x" * n), Count.from_page) for n in range(4)]
        fan_in = await producer.enqueue_workflow(group(*members).then(Sum.from_counts))
        assert await fan_in.result(timeout=30) == 2 + 3 + 4 + 5
        assert sums == [f"{fan_in.job_id}|4"]
        failing = group(Count(text="ab"), Count(text="boom")).then(Sum.from_counts)
        doomed = await producer.enqueue_workflow(chain(failing, Double.from_count))
        with pytest.raises(JobFailedError, match=r"workflow failed: step .* failed: .*boom"):
            await doomed.result(timeout=30)
        partial = group(
            Count(text="abc"), chain(Count(text="boom"), Double.from_count)
        ).then_partial(Sum.from_some)
        assert await (await producer.enqueue_workflow(partial)).result(timeout=30) == 3
        assert len(sums) == 2 and sums[1].endswith("|2")
    finally:
        worker.shutdown()
        await running


async def test_a_cancelled_step_fails_or_reaches_the_steps_after_it(backend: Backend) -> None:
    if type(backend).__name__ == "RabbitMqBackend":
        pytest.skip("RabbitMQ refuses workflows")
    producer = await Producer.create(FlowQueues, backend)
    doomed = await producer.enqueue_workflow(chain(Count(text="a"), Double.from_count))
    assert await producer.cancel(doomed.job_id) == "cancelled"  # the waiting step itself
    with pytest.raises(JobFailedError, match="cancelled"):
        await doomed.result(timeout=10)
    first = Count(text="abc")
    flow = group(first, chain(Count(text="zz"), Double.from_count)).then_partial(Sum.from_some)
    partial = await producer.enqueue_workflow(flow)
    roots = [s.job_id for s in flow.nodes if s.job is not None]
    assert await producer.cancel(roots[1]) == "cancelled"  # a pending root: its chain fails
    info = await producer.job(flow.nodes[2].job_id)
    assert info is not None and info.state == "failed"
    worker = Worker(FlowQueues, backend, concurrency=4)

    async def record(kind: str, key: str) -> None:
        return None

    register(worker, record)
    running = asyncio.create_task(worker.run())
    try:
        assert await partial.result(timeout=30) == 3  # the cancelled chain as a StepFailed
    finally:
        worker.shutdown()
        await running


async def test_queue_depths_count_waiting_steps(backend: Backend) -> None:
    if not isinstance(backend, DepthBackend):
        pytest.skip("the backend does not count its queues")
    producer = await Producer.create(FlowQueues, backend)
    await producer.enqueue_workflow(chain(Fetch(url="a"), Count.from_page, Double.from_count))
    (depth,) = [d for d in await backend.queue_depths() if d.queue == FlowQueues.steps.name]
    assert (depth.pending, depth.waiting, depth.running, depth.failed) == (1, 2, 0, 0)


async def test_a_chord_whose_members_fail_under_each_policy(backend: Backend) -> None:
    """Two of four members fail: under ``then`` the callback never runs and the workflow fails
    naming a failed member; under ``then_partial`` it runs once, with the two results and the
    two errors; when every member fails, ``then_partial`` still runs it once, with errors only."""
    if type(backend).__name__ == "RabbitMqBackend":
        pytest.skip("RabbitMQ refuses workflows")
    producer = await Producer.create(FlowQueues, backend)
    sums: list[str] = []

    async def record(kind: str, key: str) -> None:
        if kind == "sum":
            sums.append(key)

    def members() -> list[Count]:
        return [Count(text="ab"), Count(text="boom"), Count(text="cde"), Count(text="boom")]

    worker = Worker(FlowQueues, backend, concurrency=8)
    register(worker, record)
    running = asyncio.create_task(worker.run())
    try:
        failing = await producer.enqueue_workflow(group(*members()).then(Sum.from_counts))
        with pytest.raises(JobFailedError, match=r"workflow failed: step .* failed: .*boom"):
            await failing.result(timeout=30)
        partial = await producer.enqueue_workflow(group(*members()).then_partial(Sum.from_some))
        assert await partial.result(timeout=30) == 2 + 3
        every = group(Count(text="boom"), Count(text="boom")).then_partial(Sum.from_some)
        none_left = await producer.enqueue_workflow(every)
        assert await none_left.result(timeout=30) == 0
        await asyncio.sleep(0.3)  # a second run of a callback would be recorded by now
    finally:
        worker.shutdown()
        await running
    assert sorted(sums) == sorted([f"{partial.job_id}|4", f"{none_left.job_id}|2"])
    info = await producer.job(failing.job_id)
    assert info is not None and info.state == "failed"
