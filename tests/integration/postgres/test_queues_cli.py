"""``queuey queues pause|resume|limit|show`` against a real database: each change is what the
claim reads (shown by ``show``) and is audited with the command line's actor."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql

from queuey.backends.postgres import PgDashboardStore, PostgresBackend
from queuey.cli import main

pytestmark = pytest.mark.postgres


async def invoke(*args: str, url: str, schema: str) -> Result:
    env = {"QUEUEY_DATABASE_URL": url}
    argv = [*args, "--schema", schema]
    return await asyncio.to_thread(CliRunner().invoke, main, argv, env=env)


async def test_pause_limit_show_and_the_audit_log(database_url: str, pg_schema: str) -> None:
    async with await PostgresBackend.connect(database_url, schema=pg_schema, migrate=True):
        pass
    run = {"url": database_url, "schema": pg_schema}
    unknown = await invoke("queues", "pause", "shop.emails", **run)
    assert unknown.exit_code == 2 and "no job queue 'shop.emails' is known here" in unknown.output
    paused = await invoke("queues", "pause", "shop.emails", "--force", **run)
    assert paused.exit_code == 0 and "job shop.emails paused" in paused.output
    spelt = ("rate 14/1s", "concurrency 3 of Send by tenant")
    typo = await invoke("queues", "limit", "shop.emails", *spelt, **run)
    assert typo.exit_code == 2 and "no job of type 'Send' is in 'shop.emails'" in typo.output
    limited = await invoke("queues", "limit", "shop.emails", *spelt, "--force", **run)
    assert limited.exit_code == 0, limited.output
    assert "declared -> rate 14/1s; concurrency 3 of Send by tenant" in limited.output
    shown = await invoke("queues", "show", "--json", **run)
    document = json.loads(shown.output)
    assert [(p["kind"], p["queue"]) for p in document["paused"]] == [("job", "shop.emails")]
    assert [row["limits"] for row in document["limits"]] == [
        "rate 14/1s; concurrency 3 of Send by tenant"
    ]
    back = await invoke("queues", "limit", "shop.emails", "--declared", **run)
    assert "rate 14/1s; concurrency 3 of Send by tenant -> declared" in back.output
    resumed = await invoke("queues", "resume", "shop.emails", **run)
    assert resumed.exit_code == 0 and "resumed" in resumed.output
    empty = await invoke("queues", "show", **run)
    assert "nothing paused" in empty.output
    async with PgDashboardStore(database_url, schema=pg_schema) as store:
        entries = list(reversed(await store.audit()))
    assert [e.action for e in entries] == ["pause", "set limits", "set limits", "resume"]
    assert all(e.actor.startswith("cli") for e in entries)


async def test_a_limit_that_does_not_parse_is_a_usage_error(
    database_url: str, pg_schema: str
) -> None:
    bad = await invoke("queues", "limit", "q", "rate 3", url=database_url, schema=pg_schema)
    assert bad.exit_code == 2
    assert "'rate 3' is not a limit" in bad.output
    both = await invoke(
        "queues", "limit", "q", "--declared", "concurrency 1", url=database_url, schema=pg_schema
    )
    assert both.exit_code == 2 and "one of them" in both.output


async def test_names_the_table_knows_need_no_force(database_url: str, pg_schema: str) -> None:
    """A queue with a job in it and that job's type are known: no ``--force``; a typo of
    either is refused with exit 2 and changes nothing."""
    async with await PostgresBackend.connect(database_url, schema=pg_schema, migrate=True):
        pass
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            sql.SQL(
                "INSERT INTO {} (id, kind, queue, job_type, payload) "
                "VALUES (gen_random_uuid(), 'job', 'shop.emails', 'shop.Send', '{{}}')"
            ).format(sql.Identifier(pg_schema, "queue_message"))
        )
    run = {"url": database_url, "schema": pg_schema}
    limited = await invoke("queues", "limit", "shop.emails", "concurrency 2 of shop.Send", **run)
    assert limited.exit_code == 0, limited.output
    typo = await invoke("queues", "limit", "shop.emails", "concurrency 2 of Send", **run)
    assert typo.exit_code == 2 and "module.ClassName" in typo.output
    assert (await invoke("queues", "pause", "shop.emails", **run)).exit_code == 0
    assert (await invoke("queues", "pause", "shop.emaisl", **run)).exit_code == 2
    shown = json.loads((await invoke("queues", "show", "--json", **run)).output)
    assert [p["queue"] for p in shown["paused"]] == ["shop.emails"]
    assert [row["limits"] for row in shown["limits"]] == ["concurrency 2 of shop.Send"]
