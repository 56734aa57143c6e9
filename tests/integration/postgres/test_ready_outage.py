"""``/ready`` follows the database: 503 while PostgreSQL is stopped, 200 again once it is back
(serial: it stops the machine's PostgreSQL; see conftest for the permission it needs)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from queuey import JobContext, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.observability import HealthServer
from tests.acceptance.metrics_app import ObsQueues, Planned

pytestmark = pytest.mark.postgres


def pg_ctl(action: str) -> None:
    """Stop or start the machine's PostgreSQL cluster (as ``restart_postgres`` restarts it)."""
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action],
        check=True,
        capture_output=True,
        timeout=60,
    )


async def until(check: Callable[[], bool], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.1)


@pytest.mark.serial
async def test_ready_is_503_while_postgres_is_stopped(database_url: str, pg_schema: str) -> None:
    if not Path("/etc/postgresql").exists():
        pytest.skip("no local PostgreSQL cluster to stop")
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="200ms") as backend:
        worker = Worker(ObsQueues, backend)

        @worker.handler(Planned)
        async def handle(job: Planned, ctx: JobContext) -> None:
            return None

        async with HealthServer(worker, host="127.0.0.1", port=0) as server:
            url = f"http://127.0.0.1:{server.port}/ready"
            async with httpx.AsyncClient(timeout=5) as client:
                task = asyncio.create_task(worker.run())
                try:
                    await until(lambda: worker.ready, 10)
                    assert (await client.get(url)).status_code == 200
                    await asyncio.to_thread(pg_ctl, "stop")
                    try:
                        await until(lambda: not worker.ready, 30)
                        assert (await client.get(url)).status_code == 503
                    finally:
                        await asyncio.to_thread(pg_ctl, "start")
                    await until(lambda: worker.ready, 60)
                    assert (await client.get(url)).status_code == 200
                finally:
                    worker.shutdown()
                    await task
