"""The worker's handler slots: one per delivery being handled, ``concurrency`` in all, shared by
every queue it consumes.

A consumer that claims from a database (PostgreSQL) takes its slots before it claims
(``backends.base.SlotAware``, given these slots as ``HandlerSlots``): it claims at most as many
rows as there are free slots, so every row it claims is handed to a handler at once and none
sits claimed but not started behind a slow one while another worker idles (or is charged a
lost lease when this worker dies). Other consumers hand out one delivery at a time, and the
loop takes its slot after (``acquire``, first come first served).

A slot is held until its delivery's handler has ended (``Runner``'s ``ran``), not until its
outcome is recorded: an ack in flight does not keep the next rows from being claimed. A plain
handler stuck past its timeout keeps its slot until its thread ends, so the worker claims less
and never queues work behind it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

__all__ = ["Slots"]


class Slots:
    """``size`` slots; ``take`` and ``acquire`` hold them, ``give`` frees them.

    Args:
        size: how many (>= 1).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._watchers: deque[Callable[[], None]] = deque()

    @property
    def free(self) -> int:
        """Slots nobody holds."""
        return self._free

    def take(self, wanted: int) -> int:
        """Hold up to ``wanted`` free slots now (a waiting ``acquire`` comes first); returns
        how many."""
        if self._waiters:
            return 0
        taken = max(0, min(wanted, self._free))
        self._free -= taken
        return taken

    async def acquire(self) -> None:
        """Hold one slot, waiting (in turn) until one is free."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot just as the wait was cancelled: pass it on
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def give(self, count: int = 1) -> None:
        """Free ``count`` slots: waiting ``acquire`` calls get them first, then every watcher
        is told (in turn, so no consumer always goes first)."""
        for _ in range(count):
            if not self._hand_over():
                self._free += 1
        if self._free > 0 and self._watchers:
            self._watchers.rotate(-1)
            for wake in tuple(self._watchers):
                wake()

    def _hand_over(self) -> bool:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return True
        return False

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake()`` whenever slots are freed; returns what stops it."""
        self._watchers.append(wake)

        def unwatch() -> None:
            if wake in self._watchers:
                self._watchers.remove(wake)

        return unwatch
