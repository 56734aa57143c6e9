"""The dedicated LISTEN connection: one per backend, outside the pool (LISTEN belongs to a
session), re-established after it drops.

It LISTENs on exactly the channels it is given, each with its own callback: the backend gives
the one channel its consumers are woken through (the channel its publishes notify), so a process
is never woken by another app's or another schema's publishes, and its schema's cancellation
channel, where a running job's worker is told it was cancelled. After every (re)connect it
issues LISTEN first and then wakes every consumer, so nothing published while it was away waits
for the poll. The session is health-checked every ``health_interval`` seconds, so a connection
killed with ``pg_terminate_backend`` or silently dropped is noticed within seconds. Errors are
logged once per outage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._store import Store
from queuey.errors import BackendError

__all__ = ["Listener", "Outage"]


def _ignore(payload: str) -> None:
    return None


class Listener:
    """Runs LISTEN on each of ``channels`` and calls its callback with the payload of each of
    its notifications, and ``on_connect()`` after each (re)connect.

    Attributes:
        channels: the channels it listens on.
        connected: set while the session is up.
    """

    def __init__(
        self,
        store: Store,
        channels: Mapping[str, Callable[[str], None]],
        on_connect: Callable[[], None],
        application_name: str = "queuey-listen",
        health_interval: float = 2.0,
        reconnect_delay: float = 0.5,
    ) -> None:
        self.channels = tuple(channels)
        self.connected = asyncio.Event()
        self._store = store
        self._callbacks = dict(channels)
        self._on_connect = on_connect
        self._application_name = application_name
        self._health = health_interval
        self._delay = reconnect_delay
        self._outage = Outage(f"LISTEN connection ({', '.join(self.channels)})")

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
                async for channel, payload in store.notifications(self._health):
                    self._callbacks.get(channel, _ignore)(payload)
                async with asyncio.timeout(self._health + 3):
                    await store.ping()
