"""The dedicated LISTEN connection: one per backend, outside the pool (LISTEN belongs to a
session), re-established after it drops.

After every (re)connect it issues LISTEN first and then wakes every consumer, so nothing
published while it was away waits for the poll. The session is health-checked every
``health_interval`` seconds, so a connection killed with ``pg_terminate_backend`` or silently
dropped is noticed within seconds. Errors are logged once per outage.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import psycopg
from psycopg import sql

from queuey.secrets import redact

__all__ = ["Listener", "Outage"]

log = logging.getLogger("queuey.postgres")


class Outage:
    """Logs the first failure of an outage at WARNING and its end at INFO, nothing between."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.down = False

    def failed(self, exc: BaseException) -> None:
        """Record a failure; only the first of an outage is logged."""
        if not self.down:
            self.down = True
            log.warning(
                "%s failed: %s (retrying quietly until it is back)",
                self.what,
                redact(str(exc).strip() or type(exc).__name__),
            )

    def recovered(self) -> None:
        """Record a success; logs once if an outage just ended."""
        if self.down:
            self.down = False
            log.info("%s is back", self.what)


class Listener:
    """Runs LISTEN on ``channels`` and calls ``on_notify(payload)`` for each notification and
    ``on_connect()`` after each (re)connect."""

    def __init__(
        self,
        conninfo: str,
        channels: Sequence[str],
        on_notify: Callable[[str], None],
        on_connect: Callable[[], None],
        application_name: str = "queuey-listen",
        health_interval: float = 2.0,
        reconnect_delay: float = 0.5,
    ) -> None:
        self._conninfo = conninfo
        self._channels = list(dict.fromkeys(channels))
        self._on_notify = on_notify
        self._on_connect = on_connect
        self._application_name = application_name
        self._health = health_interval
        self._delay = reconnect_delay
        self._outage = Outage(f"LISTEN connection ({', '.join(self._channels)})")
        self.connected = asyncio.Event()

    async def run(self) -> None:
        """Listen until cancelled, reconnecting with capped backoff."""
        delay = self._delay
        while True:
            try:
                await self._session()
            except (psycopg.Error, OSError, TimeoutError) as exc:
                self.connected.clear()
                self._outage.failed(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            else:
                delay = self._delay

    async def _session(self) -> None:
        conn = await psycopg.AsyncConnection.connect(
            self._conninfo,
            autocommit=True,
            connect_timeout=5,
            application_name=self._application_name,
        )
        async with conn:
            for channel in self._channels:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            self._outage.recovered()
            self.connected.set()
            self._on_connect()
            while True:
                async for notify in conn.notifies(timeout=self._health):
                    self._on_notify(notify.payload)
                async with asyncio.timeout(self._health + 3):
                    await conn.execute("SELECT 1")
