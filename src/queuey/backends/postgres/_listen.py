"""The dedicated LISTEN connection: one per backend, outside the pool (LISTEN belongs to a
session), re-established after it drops.

It LISTENs on exactly the channels it is given: the backend gives the one channel its consumers
are woken through (the channel its publishes notify), so a process is never woken by another
app's or another schema's publishes. After every (re)connect it issues LISTEN first and then
wakes every consumer, so nothing published while it was away waits for the poll. The session is
health-checked every ``health_interval`` seconds, so a connection killed with
``pg_terminate_backend`` or silently dropped is noticed within seconds. Errors are logged once
per outage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._store import Store
from queuey.errors import BackendError

__all__ = ["Listener", "Outage"]


class Listener:
    """Runs LISTEN on ``channels`` and calls ``on_notify(payload)`` for each notification and
    ``on_connect()`` after each (re)connect. Its failures are logged through ``outage`` (the
    backend's, so a restart is one outage), else through an outage of its own.

    Attributes:
        channels: the channels it listens on, without duplicates.
        connected: set while the session is up.
    """

    def __init__(
        self,
        store: Store,
        channels: Sequence[str],
        on_notify: Callable[[str], None],
        on_connect: Callable[[], None],
        application_name: str = "queuey-listen",
        health_interval: float = 2.0,
        reconnect_delay: float = 0.5,
        outage: Outage | None = None,
    ) -> None:
        self.channels = tuple(dict.fromkeys(channels))
        self.connected = asyncio.Event()
        self._store = store
        self._on_notify = on_notify
        self._on_connect = on_connect
        self._application_name = application_name
        self._health = health_interval
        self._delay = reconnect_delay
        self._outage = outage or Outage(f"LISTEN connection ({', '.join(self.channels)})")

    async def run(self) -> None:
        """Listen until cancelled, reconnecting with capped backoff."""
        delay = self._delay
        while True:
            try:
                await self._session()
            except BackendError as exc:
                self.connected.clear()
                self._outage.failed(exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            else:
                delay = self._delay

    async def _session(self) -> None:
        session = self._store.session(
            check_schema=False, connect_timeout=5, application_name=self._application_name
        )
        async with session as store:
            await store.listen(self.channels)
            self._outage.recovered()
            self.connected.set()
            self._on_connect()
            while True:
                async for payload in store.notifications(self._health):
                    self._on_notify(payload)
                async with asyncio.timeout(self._health + 3):
                    await store.ping()
