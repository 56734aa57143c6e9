"""Cancellation of running jobs, and runs whose lease was lost: the running rows of this
process that a cancel (or another worker) may reach.

``cancel`` (``queries.sql``) marks a running row's cancel as asked for (the row stays running
and held here) and notifies its owner on the schema's cancellation channel with
``"<owner> <id>"``. The backend's listener hands each such payload to
``Cancellations.notified``, which completes the future of the delivery running that row, if
this process is its owner and still runs it; the heartbeat does the same for a request whose
notification was missed (``requested``). The runner watches that future
(``Delivery.cancel_requested``). Every other outcome of that run is refused by the fence; when
the run ends, the row is recorded cancelled (``finish_cancel``).

A held row that the heartbeat no longer finds held by this owner (``lost``: its lease expired
while this process stalled, and it may run elsewhere) has its run stopped the same way, but
the run ends with a lost lease (``Delivery.lease_lost``), not a cancellation: nothing of it can
be recorded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection

from queuey.backends.base import CancelResult

__all__ = ["Cancellations", "cancel_channel", "cancel_result"]

log = logging.getLogger("queuey.postgres")


def cancel_channel(schema: str) -> str:
    """The NOTIFY channel on which the workers of ``schema`` are told of cancelled jobs."""
    return f"{schema}_cancel"[:63]


def cancel_result(was: str | None) -> CancelResult:
    """What ``cancel`` did, from the status the row had (``None``: no row could be)."""
    if was == "running":
        return "requested"
    return "not_found" if was is None else "cancelled"


class Cancellations:
    """The cancel requests of the rows one backend (``owner``) runs, by row id."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._events: dict[str, asyncio.Future[None]] = {}
        self._watched: dict[str, float] = {}  # when each run began here (time.monotonic())
        self._lost: set[str] = set()

    def watch(self, row_id: str) -> asyncio.Future[None]:
        """The future done when ``row_id`` is cancelled while this process runs it."""
        future = self._events[row_id] = asyncio.get_running_loop().create_future()
        self._watched[row_id] = time.monotonic()
        return future

    def forget(self, row_id: str) -> None:
        """``row_id`` was settled: a cancel can no longer reach it here."""
        self._events.pop(row_id, None)
        self._watched.pop(row_id, None)
        self._lost.discard(row_id)

    def is_lost(self, row_id: str) -> bool:
        """Whether the run of ``row_id`` here lost its lease (``lost``)."""
        return row_id in self._lost

    def lost(self, row_ids: Collection[str], sent: float) -> None:
        """The heartbeat sent at ``sent`` (``time.monotonic()``, taken before it read which
        rows are held) found ``row_ids`` no longer held by this owner (their lease expired
        while this process stalled; another worker may run them): stop their runs, which end
        with a lost lease (nothing of them can be recorded). A run that began here after
        ``sent`` is a new claim of the row (settled and claimed again while the heartbeat was
        in flight): the heartbeat did not see it, so it is left alone."""
        for row_id in row_ids:
            future = self._events.get(row_id)
            if future is None or row_id in self._lost or self._watched.get(row_id, 0.0) > sent:
                continue
            log.warning(
                "job %s: this worker lost its lease (the row is no longer held here and may "
                "run elsewhere); stopping its run",
                row_id,
            )
            self._lost.add(row_id)
            if not future.done():
                future.set_result(None)

    def requested(self, row_ids: Collection[str]) -> None:
        """The heartbeat found a cancel asked for on ``row_ids`` (held here): stop their runs
        as the notification would have."""
        for row_id in row_ids:
            future = self._events.get(row_id)
            if future is not None and not future.done():
                log.info("job %s was cancelled while it ran; stopping it", row_id)
                future.set_result(None)

    def notified(self, payload: str) -> None:
        """A notification ``"<owner> <id>"``: complete the future of that row if this process
        is its owner and still runs it."""
        owner, _, row_id = payload.rpartition(" ")
        future = self._events.get(row_id) if owner == self.owner else None
        if future is not None and not future.done():
            log.info("job %s was cancelled while it ran; stopping it", row_id)
            future.set_result(None)
