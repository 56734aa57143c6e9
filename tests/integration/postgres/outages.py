"""The two ways the outage tests make PostgreSQL unreachable (the ``outage`` fixture of this
folder's ``conftest.py`` gives one of each):

- through a TCP proxy (``tests.tcp_proxy``) that is cut (every connection dropped, new ones
  refused) and started again. Private to the test, so it runs with the rest of the suite;
- by stopping and starting the machine's PostgreSQL (``pg_ctlcluster``), as in a real
  restart. That stops the database every other test uses, so such a test is ``serial`` and
  runs only with the permission ``tests/conftest.py`` asks for.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

from tests.tcp_proxy import Proxy, through

__all__ = ["Outage", "pg_ctl", "proxied"]


class Outage:
    """Makes the database unreachable (``cut``) and reachable again (``restore``) for clients
    that connect to ``url``; ``observable``: the test can still read the database meanwhile
    (true through the proxy, false when the server itself is stopped)."""

    def __init__(self, url: str, proxy: Proxy | None) -> None:
        self.url = url
        self.observable = proxy is not None
        self._proxy = proxy

    async def cut(self) -> None:
        if self._proxy is not None:
            await self._proxy.cut()
        else:
            await asyncio.to_thread(pg_ctl, "stop")

    async def restore(self) -> None:
        if self._proxy is not None:
            await self._proxy.start()
        else:
            await asyncio.to_thread(pg_ctl, "start")


def pg_ctl(action: str, *, check: bool = True) -> None:
    """``pg_ctlcluster <newest version> main <action>``."""
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action],
        check=check,
        capture_output=True,
        timeout=60,
    )


@asynccontextmanager
async def proxied(database_url: str) -> AsyncIterator[Outage]:
    """An ``Outage`` through a started proxy to ``database_url``, cut on exit."""
    parts = urlsplit(database_url)
    proxy = Proxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    await proxy.start()
    try:
        yield Outage(through(database_url, proxy.port), proxy)
    finally:
        await proxy.cut()
