"""The backend's maintenance: the heartbeat that keeps this process's leases alive, and the
sweep that reclaims expired leases, dead-letters expired messages and prunes old done rows.

Both run in the background from the first consumer until the backend closes, on the store
only. A failing statement is logged once per outage and tried again at the next beat or sweep;
a heartbeat that could not reach the database leaves the renewal to the backend's
``Recovery``, which renews the leases as soon as the database answers again (before it writes
the outcomes kept meanwhile), not a third of a lease later.
Any number of processes may sweep one table at once: every statement is one ``UPDATE`` or
``DELETE`` whose ``WHERE`` makes a second sweeper find nothing left to do.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._recovery import Recovery
from queuey.backends.postgres._store import Store

__all__ = ["PROGRESS_DELAY", "PRUNE_BATCH", "Maintenance", "MaintenanceOptions"]

PROGRESS_DELAY = 1.0
"""At most how long a progress report waits for the heartbeat that writes it (seconds)."""

log = logging.getLogger("queuey.postgres")

PRUNE_BATCH = 1000
"""Done rows deleted by one ``prune`` statement, at most."""


@dataclass(frozen=True)
class MaintenanceOptions:
    """How maintenance runs.

    Attributes:
        lease: how long a claim holds a row (seconds); the heartbeat beats every third of it.
        poll_interval: seconds between sweeps (each sweep then wakes every consumer).
        max_redeliveries: lost leases after which a row ends ``failed``.
        retain: delete done rows older than this (seconds); ``None`` or 0 keeps them.
    """

    lease: float
    poll_interval: float
    max_redeliveries: int
    retain: float | None


class Maintenance:
    """Heartbeat and sweeps over one store.

    Args:
        store: the store.
        held: the rows this process holds (read at each beat).
        options: intervals and limits.
        outage: where failures are recorded (its recovery wakes the consumers).
        wake_all: wakes every consumer (after a sweep; after a reclaim made rows due).
        on_lost: told the held rows that are no longer this owner's (their lease was lost),
            with when the heartbeat was sent (``time.monotonic()``).
        on_cancel: told the held rows whose cancel was asked for (a notification may have
            been missed).
        recovery: told when a beat renewed every held lease, or could not reach the database.
        progress: the last progress reported per held row (JSON text), written by the next
            beat; a report makes that beat come within ``PROGRESS_DELAY``.
    """

    def __init__(
        self,
        store: Store,
        held: Collection[str],
        options: MaintenanceOptions,
        outage: Outage,
        wake_all: Callable[[], None],
        on_lost: Callable[[Collection[str], float], None] = lambda ids, sent: None,
        on_cancel: Callable[[Collection[str]], None] = lambda ids: None,
        recovery: Recovery | None = None,
        progress: dict[str, str] | None = None,
    ) -> None:
        self._store = store
        self._held = held
        self.options = options
        self._outage = outage
        self._wake_all = wake_all
        self._on_lost = on_lost
        self._on_cancel = on_cancel
        self._recovery = recovery
        self._progress = {} if progress is None else progress

    async def heartbeat(self) -> None:
        """Extend the leases of the held rows every third of the lease, and within
        ``PROGRESS_DELAY`` of a progress report (the reports of that time coalesced into the
        one beat), until cancelled."""
        every = self.options.lease / 3
        tick = min(PROGRESS_DELAY, every)
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(tick)
            if self._progress or loop.time() - last >= every - tick / 2:
                last = loop.time()
                await self.beat()

    async def beat(self) -> None:
        """Extend the held rows' leases once; rows held here that are no longer this owner's
        running rows (reclaimed after a stall: the lease was lost) go to ``on_lost``, and those
        whose cancel was asked for to ``on_cancel`` (its notification may have been missed),
        so their runs stop instead of going on unseen."""
        sent = time.monotonic()  # before the snapshot: a run claimed after it is not judged
        held = set(self._held)
        reported = self._take_progress(held)
        extended = await self._outage.attempt(self._extend(held, reported)) if held else {}
        if self._recovery is not None:
            if extended is None:
                self._recovery.renewal_failed()
            else:
                self._recovery.renewed(sent)
        if extended is None:
            return
        if held - extended.keys():
            self._on_lost(held - extended.keys(), sent)
        cancelled = [row_id for row_id, cancel in extended.items() if cancel]
        if cancelled:
            self._on_cancel(cancelled)

    def _extend(self, held: set[str], reported: dict[str, str]) -> Awaitable[dict[str, bool]]:
        """The heartbeat statement: ``extend``, or ``extend_progress`` carrying ``reported``."""
        if reported:
            return self._store.extend_progress(held, reported)
        return self._store.extend(held)

    def _take_progress(self, held: set[str]) -> dict[str, str]:
        """The progress reported since the last beat for rows still held (the rest dropped)."""
        if not self._progress:
            return {}
        taken = {}
        for row_id in list(self._progress):
            text = self._progress.pop(row_id, None)
            if text is not None and row_id in held:
                taken[row_id] = text
        return taken

    async def sweeps(self) -> None:
        """Sweep, wait ``poll_interval``, wake every consumer (the poll); until cancelled."""
        while True:
            await self.sweep()
            await asyncio.sleep(self.options.poll_interval)
            self._wake_all()

    async def sweep(self) -> None:
        """Reclaim expired leases, dead-letter expired messages, prune done rows."""
        await self.reclaim()
        await self._outage.attempt(self._store.expire())
        if self.options.retain:
            await self.prune()

    async def reclaim(self) -> int:
        """Rows whose lease expired back to pending (or failed after ``max_redeliveries``);
        wakes the consumers when there were any. Returns how many."""
        reclaimed = await self._outage.attempt(self._store.reclaim(self.options.max_redeliveries))
        if not reclaimed:
            return 0
        failed = sum(1 for row in reclaimed if row.status == "failed")
        log.warning(
            "reclaimed %d row(s) whose worker was lost (%d now failed)", len(reclaimed), failed
        )
        self._wake_all()
        return len(reclaimed)

    async def prune(self) -> int:
        """Delete done rows older than ``retain`` in batches of ``PRUNE_BATCH``; returns the
        count (what was deleted before a failure, if one stops it)."""
        total = 0
        while self.options.retain:
            deleted = await self._outage.attempt(
                self._store.prune(self.options.retain, PRUNE_BATCH)
            )
            total += deleted or 0
            if not deleted or deleted < PRUNE_BATCH:
                break
        return total
