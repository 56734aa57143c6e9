"""Fixtures shared by the PostgreSQL integration tests: a backend on the test's own schema, and
outages of the test database (``outages.py``).

A module that needs other backend settings overrides ``backend_settings``::

    @pytest.fixture
    def backend_settings() -> dict[str, Any]:
        return {"poll_interval": "300ms", "lease": "1s"}
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from queuey.backends.postgres import PostgresBackend
from tests.integration.postgres.outages import Outage, pg_ctl, proxied


@pytest.fixture
def backend_settings() -> dict[str, Any]:
    """Keyword arguments of the ``backend`` fixture's ``PostgresBackend`` (a 30 s poll: the
    tests that wait for a claim rely on a notification, not on the poll)."""
    return {"poll_interval": "30s"}


@pytest.fixture
async def backend(
    database_url: str, pg_schema: str, backend_settings: dict[str, Any]
) -> AsyncIterator[PostgresBackend]:
    """An open ``PostgresBackend`` on the test's schema, with ``backend_settings``; closed
    afterwards."""
    async with PostgresBackend(database_url, schema=pg_schema, **backend_settings) as opened:
        yield opened


@pytest.fixture(params=["proxy", pytest.param("server", marks=pytest.mark.serial)])
async def outage(request: pytest.FixtureRequest, database_url: str) -> AsyncIterator[Outage]:
    """An ``Outage`` of the test database: through a proxy, or (serial) of the server itself."""
    if request.param == "proxy":
        async with proxied(database_url) as through_proxy:
            yield through_proxy
        return
    if not Path("/etc/postgresql").exists():
        pytest.skip("no local PostgreSQL cluster to stop")
    try:
        yield Outage(database_url, None)
    finally:  # running again whatever the test did ("already running" is fine)
        await asyncio.to_thread(pg_ctl, "start", check=False)


@pytest.fixture
async def proxy_outage(database_url: str) -> AsyncIterator[Outage]:
    """An ``Outage`` through a proxy only (for outages too long to stop the shared server)."""
    async with proxied(database_url) as through_proxy:
        yield through_proxy
