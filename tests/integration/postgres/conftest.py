"""Fixtures of the PostgreSQL outage tests (``outages.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.postgres.outages import Outage, pg_ctl, proxied


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
