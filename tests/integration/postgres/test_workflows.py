"""Workflows on PostgreSQL: a chain passes each step's result to the next, a fan-in runs once
with its members' results in member order, under each failure policy; a step waits (never
claimed) until its parents have ended."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from psycopg import sql

from queuey import JobFailedError, Producer, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.errors import ConfigError
from queuey.workflows import chain, group
from tests.integration.postgres.test_backend import execute, table
from tests.integration.postgres.workflow_app import (
    Count,
    Double,
    Fetch,
    FlowQueues,
    Sum,
    register,
)

pytestmark = pytest.mark.postgres


@asynccontextmanager
async def running(url: str, schema: str) -> AsyncIterator[tuple[Producer[FlowQueues], list[str]]]:
    """A producer and a worker on ``schema``; the list of the sums' runs (job ids)."""
    sums: list[str] = []

    async def record(kind: str, key: str) -> None:
        if kind == "sum":
            sums.append(key.split("|")[0])

    async with PostgresBackend(url, schema=schema, poll_interval="200ms") as backend:
        producer = await Producer.create(FlowQueues, backend)
        worker = Worker(FlowQueues, backend, concurrency=8)
        register(worker, record)
        task = asyncio.create_task(worker.run())
        try:
            yield producer, sums
        finally:
            worker.shutdown()
            await task


async def statuses(url: str, schema: str) -> dict[str, int]:
    query = sql.SQL("SELECT status, count(*) FROM {} GROUP BY status").format(table(schema))
    return {status: count for status, count in await execute(url, query)}


async def test_a_chain_passes_each_result_to_the_next_step(
    database_url: str, pg_schema: str
) -> None:
    async with running(database_url, pg_schema) as (producer, _):
        handle = await producer.enqueue_workflow(
            chain(Fetch(url="abc"), Count.from_page, Double.from_count)
        )
        assert await handle.result(timeout=30) == 10  # len("<abc>") * 2
    assert await statuses(database_url, pg_schema) == {"done": 3}


async def test_steps_wait_until_their_parents_end(database_url: str, pg_schema: str) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        flow = chain(Fetch(url="a"), Count.from_page)
        await producer.enqueue_workflow(flow)
        assert await statuses(database_url, pg_schema) == {"pending": 1, "waiting": 1}
        consumer = backend.consumer(FlowQueues.steps.config)
        first = await consumer.next()
        assert first is not None and first.envelope.job_type == "flows.Fetch"
        with pytest.raises(TimeoutError):  # the step waits: nothing else to claim
            await asyncio.wait_for(consumer.next(), 0.5)
        await first.ack('{"body": "xyz"}')
        second = await consumer.next()
        assert second is not None and second.envelope.job_type == "flows.Count"
        parents = [flow.nodes[0].job_id]
        assert second.envelope.payload == {
            "__queuey_step__": {
                "builder": "from_page",
                "many": False,
                "parents": parents,
                "inputs": [{"body": "xyz"}],
            }
        }


async def test_a_fan_in_runs_once_with_every_result_in_member_order(
    database_url: str, pg_schema: str
) -> None:
    members = [chain(Fetch(url="x" * n), Count.from_page) for n in range(6)]
    async with running(database_url, pg_schema) as (producer, sums):
        handle = await producer.enqueue_workflow(group(*members).then(Sum.from_counts))
        assert await handle.result(timeout=30) == sum(n + 2 for n in range(6))
        await asyncio.sleep(0.5)
    assert sums == [handle.job_id]
    assert await statuses(database_url, pg_schema) == {"done": 13}


async def test_a_failed_member_fails_the_workflow_under_then(
    database_url: str, pg_schema: str
) -> None:
    flow = group(Count(text="ab"), Count(text="boom"), Count(text="c")).then(Sum.from_counts)
    async with running(database_url, pg_schema) as (producer, sums):
        handle = await producer.enqueue_workflow(chain(flow, Double.from_count))
        with pytest.raises(JobFailedError) as failed:
            await handle.result(timeout=30)
    assert "workflow failed: step" in str(failed.value) and "boom" in str(failed.value)
    assert sums == []
    assert await statuses(database_url, pg_schema) == {"done": 2, "failed": 3}


async def test_a_failed_member_reaches_the_callback_under_then_partial(
    database_url: str, pg_schema: str
) -> None:
    flow = group(Count(text="ab"), Count(text="boom"), Count(text="c")).then_partial(Sum.from_some)
    async with running(database_url, pg_schema) as (producer, sums):
        handle = await producer.enqueue_workflow(flow)
        assert await handle.result(timeout=30) == 3
    rows = await execute(
        database_url,
        sql.SQL("SELECT payload::text FROM {} WHERE id = %s").format(table(pg_schema)),
        handle.job_id,
    )
    assert "boom" in rows[0][0]
    assert sums == [handle.job_id]


async def test_a_step_feeding_another_must_declare_a_result(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        flow = chain(Count(text="a"), Double.from_count)
        await producer.enqueue_workflow(flow)
        with pytest.raises(ConfigError, match="appears twice"):
            await producer.enqueue_workflow(group(flow, flow).then(Sum.from_counts))
        with pytest.raises(ConfigError, match="not a classmethod of a job class"):
            chain(Count(text="a"), lambda n: Double(n=n))


async def expire(backend: PostgresBackend, url: str, schema: str, job_id: str) -> None:
    """The worker running ``job_id`` is lost: its lease expires and the sweep reclaims it."""
    query = sql.SQL("UPDATE {} SET lease_until = now() - interval '1 second' WHERE id = %s")
    await execute(url, query.format(table(schema)), job_id)
    await backend.sweep()


async def test_a_step_lost_for_good_fails_its_workflow_or_reaches_a_partial_fan_in(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema, max_redeliveries=1) as backend:
        producer = await Producer.create(FlowQueues, backend)
        consumer = backend.consumer(FlowQueues.steps.config)
        failing = await producer.enqueue_workflow(chain(Count(text="a"), Double.from_count))
        lost = await consumer.next()
        assert lost is not None
        await expire(backend, database_url, pg_schema, lost.envelope.job_id)
        with pytest.raises(JobFailedError, match=f"step {lost.envelope.job_id} failed: worker"):
            await failing.result(timeout=10)
        partial = await producer.enqueue_workflow(
            group(Count(text="a"), Count(text="bb")).then_partial(Sum.from_some)
        )
        first, second = await consumer.next(), await consumer.next()
        assert first is not None and second is not None
        await expire(backend, database_url, pg_schema, first.envelope.job_id)
        await second.ack("2")
        fan_in = await consumer.next()
        assert fan_in is not None and fan_in.envelope.job_id == partial.job_id
        inputs = fan_in.envelope.payload["__queuey_step__"]["inputs"]
        assert len(inputs) == 2 and 2 in inputs
        (failure,) = [i for i in inputs if i != 2]
        assert failure["queuey_failed"]["job_id"] == first.envelope.job_id
