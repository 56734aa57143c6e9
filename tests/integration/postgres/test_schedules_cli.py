"""``queuey schedules list|pause|resume`` against a real database."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner, Result

from queuey.backends.postgres import PostgresBackend
from queuey.cli import main
from queuey.schedule import ScheduleRecord

pytestmark = pytest.mark.postgres


async def invoke(*args: str, url: str) -> Result:
    env = {"QUEUEY_DATABASE_URL": url}
    return await asyncio.to_thread(CliRunner().invoke, main, list(args), env=env)


async def test_list_pause_resume(database_url: str, pg_schema: str) -> None:
    async with await PostgresBackend.connect(database_url, schema=pg_schema) as backend:
        empty = await invoke("schedules", "list", "--schema", pg_schema, url=database_url)
        assert empty.exit_code == 0 and "no schedules" in empty.output
        await backend.register_schedules(
            [
                ScheduleRecord("nightly", "0 3 * * *", "Europe/Paris"),
                ScheduleRecord("tick", "every 10s", "UTC"),
            ]
        )
        slot = datetime(2024, 5, 1, 1, tzinfo=UTC)
        await backend.record_fired("nightly", slot, "00000000-0000-4000-8000-000000000001")
        paused = await invoke(
            "schedules", "pause", "nightly", "--schema", pg_schema, url=database_url
        )
        assert paused.exit_code == 0 and "paused" in paused.output
        listed = await invoke(
            "schedules", "list", "--json", "--schema", pg_schema, url=database_url
        )
        assert listed.exit_code == 0, listed.output
        rows = {row["name"]: row for row in json.loads(listed.output)}
        assert rows["nightly"]["paused"] is True and rows["tick"]["paused"] is False
        assert rows["nightly"]["last_fired"] == "2024-05-01T01:00:00+00:00"
        assert rows["tick"]["last_fired"] is None
        upcoming = datetime.fromisoformat(rows["nightly"]["next_slot"])
        assert upcoming > datetime.now(UTC) and upcoming.hour in (1, 2)  # 03:00 in Paris
        assert datetime.fromisoformat(rows["tick"]["next_slot"]).second % 10 == 0
        table = await invoke("schedules", "list", "--schema", pg_schema, url=database_url)
        assert "nightly" in table.output and "every 10s" in table.output
        (nightly,) = [line for line in table.output.splitlines() if "nightly" in line]
        assert "2024-05-01T01:00:00+00:00" in nightly, table.output  # not cut at 80 columns
        assert rows["nightly"]["next_slot"] in nightly, table.output
        resumed = await invoke(
            "schedules", "resume", "nightly", "--schema", pg_schema, url=database_url
        )
        assert resumed.exit_code == 0
        (record,) = await backend.list_schedules(["nightly"])
        assert not record.paused
        missing = await invoke(
            "schedules", "pause", "nope", "--schema", pg_schema, url=database_url
        )
        assert missing.exit_code == 1 and "no schedule named 'nope'" in missing.output
