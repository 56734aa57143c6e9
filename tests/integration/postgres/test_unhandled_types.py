"""A worker claims only the job types it has handlers for: a job of another type of its queue
stays pending (counted by ``queuey status``) until a worker with its handler runs, as in a
rolling deploy where a new job type reaches an old worker first; the worker says at start-up
which job types of its queues it cannot run."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from click.testing import CliRunner

from queuey import Job, JobContext, MemoryBackend, Producer, Queue, QueueSet, Worker
from queuey.backends.base import Backend, JobLookup
from queuey.backends.postgres import PostgresBackend
from queuey.cli import main
from queuey.testing import run_until_idle
from tests.helpers import run_until

pytestmark = pytest.mark.postgres


class DeployQueues(QueueSet, prefix="deploy"):
    orders = Queue(prefetch=4)


class OldJob(Job[DeployQueues], queue=DeployQueues.orders, name="deploy.Old"):
    n: int


class NewJob(Job[DeployQueues], queue=DeployQueues.orders, name="deploy.New"):
    n: int


async def _state(backend: Backend, job_id: str) -> str | None:
    assert isinstance(backend, JobLookup)
    info = await backend.job(job_id)
    return None if info is None else info.state


async def _rolling_deploy(backend: Backend, caplog: pytest.LogCaptureFixture) -> tuple[str, str]:
    producer = await Producer.create(DeployQueues, backend)
    old_id = await producer.enqueue(OldJob(n=1))
    new_id = await producer.enqueue(NewJob(n=2))
    ran: list[str] = []
    old_worker = Worker(DeployQueues, backend)

    @old_worker.handler(OldJob)
    async def old(job: OldJob, ctx: JobContext) -> None:
        ran.append(ctx.job_type)

    with caplog.at_level(logging.WARNING, logger="queuey.worker"):
        await run_until(old_worker, lambda: ran == ["deploy.Old"])
    assert "no handler here for job type(s) deploy.New of queue deploy.orders" in caplog.text
    await asyncio.sleep(0.3)
    assert (await _state(backend, old_id), await _state(backend, new_id)) == ("done", "pending")
    assert list(old_worker.dead_letters) == []
    return new_id, old_id


async def _new_worker_runs_it(backend: Backend, new_id: str) -> None:
    new_worker = Worker(DeployQueues, backend)
    new_worker.register(OldJob, lambda job, ctx: None)
    new_worker.register(NewJob, lambda job, ctx: None)
    await run_until(new_worker, lambda: new_worker.stats["deploy.orders"].succeeded == 1)
    assert await _state(backend, new_id) == "done"


async def test_memory_leaves_an_unhandled_type_pending(caplog: pytest.LogCaptureFixture) -> None:
    backend = MemoryBackend()
    new_id, _ = await _rolling_deploy(backend, caplog)
    assert [e.job_type for e in backend.pending_envelopes("deploy.orders")] == ["deploy.New"]
    await _new_worker_runs_it(backend, new_id)


async def test_postgres_leaves_an_unhandled_type_pending_and_status_counts_it(
    database_url: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend = await PostgresBackend.connect(database_url, schema=pg_schema, poll_interval="1s")
    try:
        new_id, _ = await _rolling_deploy(backend, caplog)
        args = ["status", "--json", "--database-url", database_url, "--schema", pg_schema]
        result = await asyncio.to_thread(CliRunner().invoke, main, args)
        queues = json.loads(result.stdout)["queues"]
        assert [(q["queue"], q["pending"], q["failed"]) for q in queues] == [
            ("deploy.orders", 1, 0)
        ]
        await _new_worker_runs_it(backend, new_id)
    finally:
        await backend.close()


@pytest.mark.looptime
async def test_run_until_idle_names_the_job_types_the_worker_has_no_handler_for() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(DeployQueues, backend)
    await producer.enqueue(OldJob(n=1))
    await producer.enqueue(NewJob(n=2))
    worker = Worker(DeployQueues, backend)
    worker.register(OldJob, lambda job, ctx: None)
    assert worker.handles("deploy.Old") and not worker.handles("deploy.New")
    with pytest.raises(TimeoutError) as raised:
        await run_until_idle(worker, backend, timeout=5)
    assert "on deploy.orders: 1 pending (deploy.New)" in str(raised.value)
    assert "no handler in this worker for deploy.New" in str(raised.value)
