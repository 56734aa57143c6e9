"""Periodic schedules on PostgreSQL with real processes: three workers fire every slot of an
``every="1s"`` schedule exactly once, and a worker SIGKILLed midway changes nothing; and the
schedules' shared state (pause, last slot) through the backend."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql

from queuey.backends.postgres import PostgresBackend
from queuey.schedule import ScheduleRecord
from tests.helpers import ROOT, python_path

pytestmark = pytest.mark.postgres


def start_workers(url: str, schema: str, count: int) -> list[subprocess.Popen[str]]:
    """``count`` worker processes started together, once each says it is ready."""
    env = {**os.environ, "PYTHONPATH": python_path()}
    command = [sys.executable, "-m", "tests.integration.postgres.schedule_app", url, schema]
    procs = [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return procs


async def fired_slots(url: str, schema: str) -> list[tuple[str, int, int]]:
    """Per slot: the slot key, its rows, and the runs of its job."""
    query = sql.SQL(
        "SELECT m.unique_key, count(DISTINCT m.id), count(r.job_id) FROM {} AS m "
        "LEFT JOIN {} AS r ON r.job_id = m.id WHERE m.unique_key LIKE 'schedule:tick:%%' "
        "GROUP BY m.unique_key ORDER BY m.unique_key"
    ).format(sql.Identifier(schema, "queue_message"), sql.Identifier(schema, "runs"))
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        return await (await conn.execute(query)).fetchall()


async def test_three_workers_fire_each_slot_once_and_a_kill_changes_nothing(
    database_url: str, pg_schema: str
) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("CREATE TABLE {} (job_id uuid, pid int)").format(
                sql.Identifier(pg_schema, "runs")
            )
        )
    procs = start_workers(database_url, pg_schema, 3)
    try:
        await asyncio.sleep(5)
        procs[0].send_signal(signal.SIGKILL)
        await asyncio.sleep(5)
    finally:
        for proc in procs[1:]:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=15)
    assert procs[0].returncode == -signal.SIGKILL
    slots = await fired_slots(database_url, pg_schema)
    moments = [datetime.fromisoformat(key.split(":", 2)[2]) for key, _, _ in slots]
    assert len(slots) >= 8
    assert all(rows == 1 for _, rows, _ in slots), slots  # each slot fired exactly once
    gaps = [b - a for a, b in itertools.pairwise(moments)]
    assert set(gaps) == {timedelta(seconds=1)}, moments  # and none was missed
    assert all(runs >= 1 for _, _, runs in slots[:-1]), slots  # and each ran


async def test_the_schedule_state_is_shared(database_url: str, pg_schema: str) -> None:
    async with await PostgresBackend.connect(database_url, schema=pg_schema) as backend:
        now = await backend.clock()
        assert abs(now - datetime.now(UTC)) < timedelta(seconds=5)
        await backend.register_schedules([ScheduleRecord("nightly", "0 3 * * *", "UTC")])
        slot = datetime(2024, 5, 1, 3, tzinfo=UTC)
        await backend.record_fired("nightly", slot, "00000000-0000-4000-8000-000000000001")
        await backend.record_fired(
            "nightly", slot - timedelta(days=1), "00000000-0000-4000-8000-000000000002"
        )
        assert await backend.set_schedule_paused("nightly", True)
        assert not await backend.set_schedule_paused("other", True)
        await backend.register_schedules([ScheduleRecord("nightly", "0 4 * * *", "Europe/Paris")])
        (record,) = await backend.list_schedules(["nightly"])
        assert (record.expression, record.tz, record.paused) == ("0 4 * * *", "Europe/Paris", True)
        assert record.last_slot == slot
        assert record.last_job_id == "00000000-0000-4000-8000-000000000001"
        assert await backend.job_state(record.last_job_id) is None
