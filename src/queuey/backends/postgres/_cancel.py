"""Cancellation of running jobs: the running rows of this process a cancel may reach.

``cancel`` (``queries.sql``) marks a running row cancelled and notifies its owner on the
schema's cancellation channel with ``"<owner> <id>"``. The backend's listener hands each such
payload to ``Cancellations.notified``, which completes the future of the delivery running that
row, if this process is its owner and still runs it. The runner watches that future
(``Delivery.cancel_requested``). Whatever the handler does afterwards, the row is already
cancelled: every settle of its worker is refused by the fence.
"""

from __future__ import annotations

import asyncio
import logging

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

    def watch(self, row_id: str) -> asyncio.Future[None]:
        """The future done when ``row_id`` is cancelled while this process runs it."""
        future = self._events[row_id] = asyncio.get_running_loop().create_future()
        return future

    def forget(self, row_id: str) -> None:
        """``row_id`` was settled: a cancel can no longer reach it here."""
        self._events.pop(row_id, None)

    def notified(self, payload: str) -> None:
        """A notification ``"<owner> <id>"``: complete the future of that row if this process
        is its owner and still runs it."""
        owner, _, row_id = payload.rpartition(" ")
        future = self._events.get(row_id) if owner == self.owner else None
        if future is not None and not future.done():
            log.info("job %s was cancelled while it ran; stopping it", row_id)
            future.set_result(None)
