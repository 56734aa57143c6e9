"""``queuey workflows list|show|cancel`` against a live database: the workflows newest first,
one workflow step by step with its parents, cancelling it by a step's id (audited), and exit 1
when there is nothing to list, show or cancel."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from queuey import Producer
from queuey.backends.postgres import PostgresBackend
from queuey.cli import main
from queuey.workflows import chain, group
from tests.integration.postgres.workflow_app import Count, Double, FlowQueues, Sum

pytestmark = pytest.mark.postgres


async def _cli(*args: str) -> Any:
    return await asyncio.to_thread(CliRunner().invoke, main, list(args))


async def test_workflows_list_show_and_cancel(database_url: str, pg_schema: str) -> None:
    target = ("--database-url", database_url, "--schema", pg_schema)
    empty = await _cli("workflows", "list", *target)
    assert empty.exit_code == 1 and "no workflows" in empty.output
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowQueues, backend)
        first = await producer.enqueue_workflow(chain(Count(text="a"), Double.from_count))
        await asyncio.sleep(0.01)
        flow = group(Count(text="a"), Count(text="b")).then(Sum.from_counts)
        handle = await producer.enqueue_workflow(flow)
    ids = [node.job_id for node in flow.nodes]
    listed = await _cli("workflows", "list", "--json", *target)
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)["workflows"]
    assert [r["id"] for r in rows] == [handle.workflow_id, first.workflow_id]
    assert rows[0]["counts"] == {"pending": 2, "waiting": 1} and rows[0]["state"] == "running"
    assert rows[0]["last_step"] == "flows.Sum"
    text = await _cli("workflows", "list", *target)
    assert text.stdout.splitlines()[0].startswith(f"{handle.workflow_id}  running  ")
    assert "(waiting 1, pending 2)" in text.stdout
    shown = await _cli("workflows", "show", ids[0], "--json", *target)  # by a step's id
    document = json.loads(shown.stdout)
    assert document["id"] == handle.workflow_id
    assert [(s["id"], s["state"], s["parents"]) for s in document["steps"]] == [
        (ids[0], "pending", []),
        (ids[1], "pending", []),
        (ids[2], "waiting", ids[:2]),
    ]
    lines = (await _cli("workflows", "show", str(handle.workflow_id), *target)).stdout
    assert f"    after: {ids[0]}, {ids[1]}" in lines and "flows.Sum" in lines
    cancelled = await _cli("workflows", "cancel", ids[2], *target)
    assert cancelled.exit_code == 0, cancelled.output
    assert cancelled.stdout == f"cancelled 3 step(s) of workflow {ids[2]}\n"
    again = await _cli("workflows", "cancel", str(handle.workflow_id), *target)
    assert again.exit_code == 1 and "no pending, waiting or running step" in again.output
    after = json.loads((await _cli("workflows", "show", ids[1], "--json", *target)).stdout)
    assert after["state"] == "cancelled" and after["counts"] == {"cancelled": 3}
    missing = await _cli("workflows", "show", str(uuid.uuid4()), *target)
    assert missing.exit_code == 1 and "no workflow" in missing.output
    bad = await _cli("workflows", "show", "nope", *target)
    assert bad.exit_code == 2
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        audit = sql.Identifier(pg_schema, "queue_message_audit")
        cursor = await conn.execute(
            sql.SQL("SELECT action, filter, count FROM {} ORDER BY id").format(audit)
        )
        assert (await cursor.fetchall())[-2:] == [
            ("cancel workflow", f"workflow {ids[2]}", 3),
            ("cancel workflow", f"workflow {handle.workflow_id}", 0),
        ]
