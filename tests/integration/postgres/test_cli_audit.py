"""Actions taken from the command line are in the dashboard's audit log: ``queuey failed
retry|discard``, ``queuey jobs cancel`` and ``queuey schedules pause|resume`` each write one
row naming the actor (``cli:<user>``), the action, its target and how many rows it changed."""

from __future__ import annotations

import asyncio

import pytest

from queuey.backends.postgres import Admin, PgDashboardStore, PostgresBackend
from queuey.schedule import ScheduleRecord
from tests.integration.postgres.test_jobs_cli import cli, land

pytestmark = pytest.mark.postgres


async def test_every_cli_action_is_in_the_audit_log(database_url: str, pg_schema: str) -> None:
    doomed, later, broken = await land(database_url, pg_schema)  # cancels doomed through Admin
    async with await PostgresBackend.connect(database_url, schema=pg_schema) as backend:
        await backend.register_schedules([ScheduleRecord("nightly", "0 3 * * *", "UTC")])
    runs = [
        ("jobs", "cancel", later),
        ("failed", "retry", broken),
        ("failed", "discard", "--all", "--cancelled"),
        ("schedules", "pause", "nightly"),
        ("schedules", "resume", "nightly"),
        ("schedules", "pause", "nope"),
    ]
    codes = [
        (await asyncio.to_thread(cli, database_url, pg_schema, *args)).exit_code for args in runs
    ]
    assert codes == [0, 0, 0, 0, 0, 1]
    async with PgDashboardStore(database_url, schema=pg_schema) as store:
        entries = list(reversed(await store.audit()))
    actor = Admin(database_url).actor
    assert actor.startswith("cli")
    assert {entry.actor for entry in entries} == {actor}
    seen = [(e.action, e.kind, e.queue, e.job_id, e.filter, e.count) for e in entries]
    assert seen == [
        ("cancel", None, None, doomed, "", 1),
        ("cancel", None, None, later, "", 1),
        ("retry", "job", "jc.work", broken, "status=failed", 1),
        ("bulk discard", "job", None, None, "status=cancelled", 2),
        ("pause schedule", None, "nightly", None, "", 1),
        ("resume schedule", None, "nightly", None, "", 1),
        ("pause schedule", None, "nope", None, "", 0),
    ]
