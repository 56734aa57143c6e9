"""Dynamic fan-out behaves alike on PostgreSQL and in memory: a step returning ``FanOut(jobs)``
adds those jobs to its workflow and the step after it (``then_each``) is built from their
results in order; fanning out to none gives it an empty list; an added job that fails fails
the workflow under ``then_each`` and reaches ``then_each_partial`` as a ``StepFailed``; a
fan-out step enqueued alone still adds its jobs; RabbitMQ refuses."""

from __future__ import annotations

import asyncio

import pytest

from queuey import JobFailedError, NotSupportedError, Producer, Worker
from queuey.backends.base import Backend
from queuey.workflows import start
from tests.integration.postgres.fan_out_app import Split, register_split
from tests.integration.postgres.workflow_app import Double, FlowQueues, Sum, register


def _worker(backend: Backend, runs: list[str]) -> Worker[FlowQueues]:
    worker = Worker(FlowQueues, backend, concurrency=8)

    async def record(kind: str, key: str) -> None:
        runs.append(kind)

    register(worker, record)
    register_split(worker, record)
    return worker


async def test_a_step_fans_out_and_its_successor_gets_the_results(backend: Backend) -> None:
    producer = await Producer.create(FlowQueues, backend)
    flow = start(Split(text="a bb ccc")).then_each(Sum.from_counts).then(Double.from_count)
    if type(backend).__name__ == "RabbitMqBackend":
        with pytest.raises(NotSupportedError):
            await producer.enqueue_workflow(flow)
        return
    runs: list[str] = []
    worker = _worker(backend, runs)
    running = asyncio.create_task(worker.run())
    try:
        assert await (await producer.enqueue_workflow(flow)).result(timeout=30) == 12
        assert runs.count("split") == 1 and runs.count("count") == 3
        empty = start(Split(text="")).then_each(Sum.from_counts)
        assert await (await producer.enqueue_workflow(empty)).result(timeout=30) == 0
        failing = start(Split(text="ab boom c")).then_each(Sum.from_counts)
        with pytest.raises(JobFailedError, match=r"workflow failed: step .* failed: .*boom"):
            await (await producer.enqueue_workflow(failing)).result(timeout=30)
        partial = start(Split(text="ab boom c")).then_each_partial(Sum.from_some)
        assert await (await producer.enqueue_workflow(partial)).result(timeout=30) == 3
        alone = await producer.enqueue(Split(text="xy z"))
        fanned = await alone.result(timeout=30)
        assert len(fanned.job_ids) == 2
        for job_id in fanned.job_ids:
            assert await producer.result(job_id, int, timeout=30) in (1, 2)
        shown = await producer.workflow(flow.last.job_id)
        assert shown is not None and len(shown.steps) == 3 + 3  # split, sum, double + 3 added
    finally:
        worker.shutdown()
        await running
