"""Batches in memory (``BatchBackend``), with the semantics of the PostgreSQL statements
(migration 0017): each member's end is counted when it is recorded; the end that leaves none
pending releases the callbacks once (``on_complete``; ``on_success`` when none failed, else it
ends cancelled); members are added only while some member has not ended."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from queuey.backends.base import JobState
from queuey.backends.batches import BATCH_HEADER, BatchProgress
from queuey.backends.memory._store import Store
from queuey.backends.steps import StepRow
from queuey.envelope import Envelope
from queuey.errors import BackendError

__all__ = ["MemoryBatchMethods"]


class _Host(Protocol):
    _store: Store


class MemoryBatchMethods:
    """The ``BatchBackend`` methods of ``MemoryBackend`` (over its store)."""

    async def start_batch(
        self: _Host,
        batch_id: str,
        rows: Sequence[StepRow],
        on_success: str | None,
        on_complete: str | None,
    ) -> None:
        """Store batch ``batch_id``: members due now, callbacks waiting (``BatchBackend``).

        Raises:
            ShutDownError: the backend is closed.
        """
        self._store.check_open()
        members = [row for row in rows if not row.parents]
        callbacks = [(row, row.job_id == on_success) for row in rows if row.parents]
        self._store.batches.start(batch_id, members, callbacks)
        for row, _ in callbacks:
            self._store.track(_envelope(row, row.payload, None), "waiting", ran=False)
        for row in members:
            self._store.insert(_envelope(row, row.payload, batch_id))

    async def add_to_batch(
        self: _Host, batch_id: str, rows: Sequence[StepRow], *, connection: Any = None
    ) -> bool:
        """Add members (due now) to batch ``batch_id`` unless it has ended (``False``).

        Raises:
            BackendError: a ``connection`` was given (memory takes none).
            ShutDownError: the backend is closed.
        """
        self._store.check_open()
        if connection is not None:
            raise BackendError("MemoryBackend does not take a database connection")
        if not self._store.batches.add(batch_id, rows):
            return False
        for row in rows:
            self._store.insert(_envelope(row, row.payload, batch_id))
        return True

    async def batch_progress(self: _Host, batch_id: str) -> BatchProgress | None:
        """Batch ``batch_id``'s counts, ``None`` when unknown.

        Raises:
            ShutDownError: the backend is closed.
        """
        self._store.check_open()
        return self._store.batches.progress(batch_id)

    def _member_ended(self: _Host, job_id: str, state: JobState) -> None:
        """Count member ``job_id``'s end; release its batch's callbacks when it was the last."""
        for row, payload, error in self._store.batches.ended(job_id, state):
            record = self._store.jobs.get(row.job_id)
            if record is None or record.state != "waiting":
                continue  # cancelled while waiting
            envelope = _envelope(row, payload, None)
            if error is None:
                self._store.insert(envelope)
            else:
                self._store.track(envelope, "cancelled", ran=False, error=error)


def _envelope(row: StepRow, payload: Any, batch_id: str | None) -> Envelope:
    """The first-attempt envelope of ``row`` carrying ``payload`` (a member: its batch)."""
    headers = None if batch_id is None else {BATCH_HEADER: batch_id}
    envelope = Envelope.new(
        row.job_type, row.queue, payload, priority=row.priority, headers=headers
    )
    return envelope.model_copy(update={"job_id": row.job_id})
