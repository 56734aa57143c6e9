"""What operators read: ``db migrate`` speaks in the schema versions a schema error names;
``status`` counts workflow steps waiting for their parents."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest
from click.testing import CliRunner

from queuey import Producer
from queuey.backends.postgres import LATEST_VERSION, PostgresBackend
from queuey.cli import main
from queuey.workflows import chain
from tests.conftest import unique
from tests.integration.postgres.workflow_app import Count, Fetch, FlowQueues

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
