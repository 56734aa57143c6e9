"""A database outage is one WARNING line when it starts and one INFO line when it ends, whatever
psycopg logs underneath (its pool warns once per failed reconnection attempt).

The non-serial test puts a TCP proxy between a worker and PostgreSQL and cuts it: every
connection drops and new ones are refused for a few seconds, as in a restart, without touching
the shared server. The serial test restarts the real server (with permission, see conftest)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from queuey import Job, JobContext, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend
from tests.integration.postgres.test_crash import restart_postgres
from tests.tcp_proxy import Proxy, through

pytestmark = pytest.mark.postgres


class OutageQueues(QueueSet, prefix="outage"):
    work = Queue(prefetch=2)


class Nothing(Job[OutageQueues], queue=OutageQueues.work, name="outage.Nothing"):
    pass


@contextlib.asynccontextmanager
async def idle_worker(url: str, schema: str) -> AsyncIterator[Worker[OutageQueues]]:
    """A worker polling an empty queue every 0.2 s (and listening, and sweeping)."""
    async with PostgresBackend(url, schema=schema, poll_interval="0.2s") as backend:
        worker = Worker(OutageQueues, backend)

        @worker.handler(Nothing)
        async def nothing(job: Nothing, ctx: JobContext) -> None:
            return None

        task = asyncio.create_task(worker.run())
        try:
            await asyncio.sleep(0.5)  # connected, listening, polling
            yield worker
        finally:
            worker.shutdown()
            await task


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    """``name: message`` of each record captured at exactly ``level``."""
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno == level]


async def back(caplog: pytest.LogCaptureFixture, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not any("is back" in line for line in lines(caplog, logging.INFO)):
            await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # anything logged late would be counted too


async def test_an_outage_under_a_worker_is_one_line_at_each_end(
    database_url: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    parts = urlsplit(database_url)
    proxy = Proxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    await proxy.start()
    async with idle_worker(through(database_url, proxy.port), pg_schema):
        caplog.set_level(logging.INFO)
        await proxy.cut()
        await asyncio.sleep(4.0)  # psycopg's pool tries again after 1 s, 2 s, ...
        await proxy.start()
        await back(caplog, timeout=30)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in warnings] == ["queuey.postgres"], warnings
    assert warnings[0].getMessage().startswith("PostgreSQL")
    assert "retrying quietly until it is back" in warnings[0].getMessage()
    assert [line for line in lines(caplog, logging.INFO) if "is back" in line] == [
        "queuey.postgres: PostgreSQL is back"
    ]


@pytest.mark.serial
async def test_a_postgres_restart_under_a_worker_is_one_line_at_each_end(
    database_url: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    if not Path("/etc/postgresql").exists():
        pytest.skip("no local PostgreSQL cluster to restart")
    async with idle_worker(database_url, pg_schema):
        caplog.set_level(logging.INFO)
        await asyncio.to_thread(restart_postgres)
        await back(caplog, timeout=60)
    warnings = [
        f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING
    ]
    assert len(warnings) == 1 and warnings[0].startswith("queuey.postgres: PostgreSQL"), warnings
    assert [line for line in lines(caplog, logging.INFO) if "is back" in line] == [
        "queuey.postgres: PostgreSQL is back"
    ]
