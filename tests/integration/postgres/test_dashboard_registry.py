"""The dashboard's Schedules and Unique keys pages list what the database holds: each
registered schedule (timing, zone, next and last slot, paused or not) and each unique key a
live job holds, with a link to that job."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from queuey import Job, Producer, Queue, QueueSet, Unique
from queuey.backends.postgres import PgDashboardStore, PostgresBackend
from queuey.schedule import ScheduleRecord
from tests.integration.postgres.dashboard_helpers import ADMIN_KEY, BASE, client, dashboard, sign_in

pytestmark = pytest.mark.postgres


class Reg(QueueSet, prefix="reg"):
    sync = Queue()


class SyncAccount(Job[Reg], queue=Reg.sync, name="reg.SyncAccount", unique=Unique(by="account")):
    account: str


@pytest.fixture
async def store(database_url: str, pg_schema: str) -> AsyncIterator[PgDashboardStore]:
    async with PgDashboardStore(database_url, schema=pg_schema) as s:
        yield s


async def test_the_schedules_and_unique_keys_pages_list_what_runs(
    store: PgDashboardStore, database_url: str, pg_schema: str
) -> None:
    async with client(dashboard(store)) as http:
        await sign_in(http, ADMIN_KEY)
        empty = [(await http.get(f"{BASE}{page}")).text for page in ("/schedules", "/unique-keys")]
        async with await PostgresBackend.connect(database_url, schema=pg_schema) as backend:
            await backend.register_schedules(
                [
                    ScheduleRecord("nightly", "0 3 * * *", "Europe/Paris"),
                    ScheduleRecord("tick", "every 10s", "UTC"),
                ]
            )
            slot = datetime(2024, 5, 1, 1, tzinfo=UTC)
            await backend.record_fired("nightly", slot, "00000000-0000-4000-8000-000000000001")
            await backend.set_schedule_paused("tick", True)
            producer = await Producer.create(Reg, backend)
            held = await producer.enqueue(SyncAccount(account="acme"))
            again = await producer.enqueue(SyncAccount(account="acme"))
        schedules = (await http.get(f"{BASE}/schedules")).text
        keys = (await http.get(f"{BASE}/unique-keys")).text
    assert "No schedule yet" in empty[0] and "No unique key is held" in empty[1]
    for text in [*empty, schedules, keys]:
        assert "not part of this version" not in text
    nightly = _row(schedules, 'data-schedule="nightly"')
    assert "<code>0 3 * * *</code>" in nightly and "Europe/Paris" in nightly
    assert "2024-05-01" in nightly and "00000000" in nightly and "running" in nightly
    assert "paused" in _row(schedules, 'data-schedule="tick"')
    assert again.inserted is False and again == held
    assert "acme" in keys and f"/jobs/{held}" in keys and "reg.SyncAccount" in keys


def _row(html: str, marker: str) -> str:
    start = html.index(marker)
    return html[start : html.index("</tr>", start)]
