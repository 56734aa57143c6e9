"""What operators read: ``db migrate`` speaks in the schema versions a schema error names;
``status`` counts workflow steps waiting for their parents."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from queuey import JobFailedError, Producer, Worker
from queuey.backends.postgres import LATEST_VERSION, PostgresBackend
from queuey.cli import main
from queuey.workflows import chain
from tests.conftest import unique
from tests.integration.postgres.workflow_app import Count, Double, Fetch, FlowQueues, register

pytestmark = pytest.mark.postgres


async def test_migrate_names_the_version_reached_not_only_a_count(database_url: str) -> None:
    schema = unique("t")
    args = ["db", "migrate", "--database-url", database_url, "--schema", schema]
    try:
        first = await asyncio.to_thread(CliRunner().invoke, main, args)
        assert first.exit_code == 0, first.output
        line = first.stdout.strip()
        reached = f"schema {schema!r}: now at version {LATEST_VERSION} (applied "
        assert line.startswith(reached), line
        assert "0001" in line and "migration(s)" in line
        again = await asyncio.to_thread(CliRunner().invoke, main, args)
        assert again.stdout.strip() == (
            f"schema {schema!r}: already at version {LATEST_VERSION} (nothing to apply)"
        )
    finally:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def test_status_counts_workflow_steps_waiting_for_their_parents(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        await producer.enqueue_workflow(chain(Fetch(url="a"), Count.from_page))
    args = ["status", "--json", "--database-url", database_url, "--schema", pg_schema]
    result = await asyncio.to_thread(CliRunner().invoke, main, args)
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["queues"]
    assert (row["pending"], row["waiting"], row["failed"]) == (1, 1, 0)
    table = await asyncio.to_thread(CliRunner().invoke, main, args[:1] + args[2:])
    assert "waiting" in table.stdout


async def _cli(*args: str) -> Any:
    return await asyncio.to_thread(CliRunner().invoke, main, list(args))


async def test_retry_refuses_a_step_that_never_ran_and_retries_built_ones(
    database_url: str, pg_schema: str
) -> None:
    target = ("--database-url", database_url, "--schema", pg_schema)
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="200ms") as backend:
        producer = await Producer.create(FlowQueues, backend)
        worker = Worker(FlowQueues, backend, concurrency=4)

        async def record(kind: str, key: str) -> None:
            return None

        register(worker, record)
        task = asyncio.create_task(worker.run())
        try:
            doomed_flow = chain(Count(text="boom"), Double.from_count)
            doomed = await producer.enqueue_workflow(doomed_flow)
            with pytest.raises(JobFailedError):
                await doomed.result(timeout=30)
            ran = await producer.enqueue_workflow(chain(Count(text="abc"), Double.from_count))
            assert await ran.result(timeout=30) == 6
        finally:
            worker.shutdown()
            await task
    root = doomed_flow.nodes[0].job_id
    refused = await _cli("failed", "retry", doomed.job_id, *target)
    assert refused.exit_code == 1, refused.output
    assert (
        f"job {doomed.job_id} is a workflow step that never ran (step {root} upstream failed): "
        f"retry step {root}, and this one waits for it again"
    ) in refused.stderr
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        # A step that was built and ran, failed for good (as an operator would find it).
        await conn.execute(
            f"UPDATE \"{pg_schema}\".queue_message SET status = 'failed' WHERE id = %s",
            (ran.job_id,),
        )
    every = await _cli("failed", "retry", "--all", *target)
    assert every.exit_code == 0, every.output
    assert "retried 2" in every.stdout  # the failed root and the built step, not the unbuilt one
    assert "left" not in every.output  # the unbuilt one waits for the root again: re-armed
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            f'SELECT id::text, status FROM "{pg_schema}".queue_message WHERE status <> %s',
            ("done",),
        )
        assert sorted(await cursor.fetchall()) == sorted(
            [(root, "pending"), (doomed.job_id, "waiting"), (ran.job_id, "pending")]
        )


async def test_schema_option_reads_queuey_schema_and_names_a_missing_schema(
    database_url: str, pg_schema: str
) -> None:
    """``--schema`` defaults to ``QUEUEY_SCHEMA``; a schema that does not exist is said so."""
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        await producer.enqueue_workflow(chain(Fetch(url="a"), Count.from_page))
    args = ["status", "--json", "--database-url", database_url]
    env = {"QUEUEY_SCHEMA": pg_schema}
    found = await asyncio.to_thread(CliRunner().invoke, main, args, env=env)
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["queues"][0]["pending"] == 1
    missing = unique("absent")
    env = {"QUEUEY_SCHEMA": missing}
    absent = await asyncio.to_thread(CliRunner().invoke, main, args, env=env)
    assert absent.exit_code != 0
    assert f"schema {missing!r} does not exist" in absent.output, absent.output
    assert f"run `queuey db migrate --schema {missing}`" in absent.output
    flag = await asyncio.to_thread(
        CliRunner().invoke, main, [*args, "--schema", pg_schema], env=env
    )
    assert flag.exit_code == 0, flag.output  # the flag wins over the variable
