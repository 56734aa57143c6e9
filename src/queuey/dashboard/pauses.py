"""Pausing queues and topic apps from the dashboard: the gate consumers obey.

A pause is a row in the pause table (migration 0004), written by the dashboard's action. A
process obeys it by handing the gate to its worker or subscriber (``gate=gate``): their
consumers, made by ``PauseGate.consumer`` over the backend's own, stop claiming while their
queue (or their whole topic app) is paused and hand back, untouched, whatever they had claimed
but not handed out; they claim again on resume. The backend itself is not wrapped, so it keeps
every capability (schedules, unique and idempotency keys, queue depths).
:meth:`PauseGate.follow` keeps the gate in step with the table (one small read per interval),
and the dashboard updates a gate in its own process at once. ``queuey run --http`` wires both.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence

from queuey._waits import first_of
from queuey.backends.base import Backend, Consumer, Delivery
from queuey.queues import QueueConfig

__all__ = ["PauseGate"]

log = logging.getLogger("queuey.dashboard")

PauseKey = tuple[str, str]
"""``(kind, queue)``: kind ``job`` or ``topic`` for a queue, ``app`` for a topic app."""


class PauseGate:
    """Which queues are paused, as this process knows it.

    Args:
        app: the topic app's prefix (``[queues] prefix``) when this process runs one: pausing
            the app (kind ``app``) then pauses every topic queue it consumes.
    """

    def __init__(self, app: str | None = None) -> None:
        self.app = app
        self._paused: frozenset[PauseKey] = frozenset()
        self._changed = asyncio.Event()

    def is_paused(self, kind: str, queue: str) -> bool:
        """Whether consumers of ``(kind, queue)`` must not claim."""
        if (kind, queue) in self._paused:
            return True
        return kind == "topic" and self.app is not None and ("app", self.app) in self._paused

    def set(self, paused: Iterable[PauseKey]) -> None:
        """Replace what is paused; consumers waiting on the gate look again."""
        paused = frozenset(paused)
        if paused != self._paused:
            self._paused = paused
            self._changed.set()
            self._changed = asyncio.Event()

    async def changed(self) -> None:
        """Return at the next change."""
        await self._changed.wait()

    def consumer(self, backend: Backend, queue: QueueConfig) -> Consumer:
        """A consumer of ``queue`` on ``backend`` that claims nothing while this gate pauses it
        (``ConsumerGate``)."""
        return GatedConsumer(backend, queue, self)

    async def follow(
        self, read: Callable[[], Awaitable[Sequence[PauseKey]]], every: float = 1.0
    ) -> None:
        """Keep the gate in step with ``read()`` (polled every ``every`` seconds) until
        cancelled. A failed read is logged once per outage and the gate left as it was."""
        failing = False
        while True:
            try:
                self.set(await read())
                failing = False
            except Exception as exc:
                if not failing:
                    log.warning("could not read the paused queues (will retry): %s", exc)
                failing = True
            await asyncio.sleep(every)


class GatedConsumer:
    """A consumer that claims through a fresh inner consumer only while its queue runs."""

    def __init__(self, backend: Backend, config: QueueConfig, gate: PauseGate) -> None:
        self._backend, self._config, self._gate = backend, config, gate
        self._inner: Consumer | None = None
        self._stopped = asyncio.Event()

    def _paused(self) -> bool:
        return self._gate.is_paused(self._config.kind, self._config.name)

    async def next(self) -> Delivery | None:
        while True:
            if self._stopped.is_set():
                return None if self._inner is None else await self._inner.next()
            if self._paused():
                await first_of(self._gate.changed(), self._stopped.wait())
                continue
            if self._inner is None:
                self._inner = self._backend.consumer(self._config)
            delivery = await self._pull(self._inner)
            if delivery is not None or self._stopped.is_set():
                return delivery

    async def _pull(self, inner: Consumer) -> Delivery | None:
        """The inner consumer's next delivery; ``None`` when a pause came first (what the
        inner consumer had claimed is then handed back)."""
        pulling = asyncio.ensure_future(inner.next())
        while not pulling.done():
            await first_of(asyncio.shield(pulling), self._gate.changed())
            if self._paused() and not self._stopped.is_set():
                break
        if not self._paused() or self._stopped.is_set():
            return await pulling
        await inner.stop()
        delivery = await pulling
        while delivery is not None:
            await delivery.release()
            delivery = await inner.next()
        self._inner = None
        return None

    async def stop(self) -> None:
        self._stopped.set()
        if self._inner is not None:
            await self._inner.stop()
