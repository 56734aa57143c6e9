"""``PostgresBackend``'s batches (``BatchBackend``, migration 0017): a batch's members and
callbacks inserted in one statement, members added while it runs, its counts read.

The counts change in the statements that end rows (``queries.sql``, part ``batch_release``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

import psycopg
from psycopg.rows import class_row, scalar_row

from queuey.backends.batches import BatchProgress
from queuey.backends.postgres._arrays import number_array, text_array
from queuey.backends.postgres._ids import parse_id
from queuey.backends.postgres._store import Store
from queuey.backends.steps import StepRow

__all__ = ["BatchMethods", "batch_progress"]


class _Host(Protocol):
    _store: Store
    channel: str

    def _check_open(self) -> None: ...


class BatchMethods:
    """The ``BatchBackend`` methods of ``PostgresBackend`` (its store, channel and state)."""

    async def start_batch(
        self: _Host,
        batch_id: str,
        rows: Sequence[StepRow],
        on_success: str | None,
        on_complete: str | None,
    ) -> None:
        """Insert batch ``batch_id``'s row, its members (due now) and its callbacks (waiting)
        in one statement; all or nothing.

        Raises:
            BackendError: nothing was written.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        params = _rows_params(batch_id, rows, self.channel)
        params.update(on_success=on_success, on_complete=on_complete)
        await self._store.publish("start_batch", params, None, len(rows))

    async def add_to_batch(
        self: _Host, batch_id: str, rows: Sequence[StepRow], *, connection: Any = None
    ) -> bool:
        """Add members to batch ``batch_id`` while some member has not ended, in one statement
        (on ``connection``, a psycopg ``AsyncConnection``: in the caller's transaction);
        ``False`` when it has ended or does not exist (nothing written).

        Raises:
            TypeError: ``connection`` is not a psycopg ``AsyncConnection``.
            ConfigError: ``batch_id`` is not a UUID.
            BackendError: nothing was written.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        if connection is not None and not isinstance(connection, psycopg.AsyncConnection):
            raise TypeError(
                f"add_to_batch takes a psycopg AsyncConnection, got {type(connection).__name__}"
            )
        params = _rows_params(parse_id(batch_id, "batch"), rows, self.channel)
        store = self._store
        added = await store._publishing("add_to_batch", params, connection, scalar_row, len(rows))
        return bool(added and added[0])

    async def batch_progress(self: _Host, batch_id: str) -> BatchProgress | None:
        """Batch ``batch_id``'s counts, ``None`` when there is no such batch.

        Raises:
            ConfigError: ``batch_id`` is not a UUID.
            BackendError: the database failed.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        return await batch_progress(self._store, batch_id)


async def batch_progress(store: Store, batch_id: str) -> BatchProgress | None:
    """``batch_progress`` on ``store``: batch ``batch_id``'s counts, ``None`` when unknown.

    Raises:
        ConfigError: ``batch_id`` is not a UUID.
    """
    params = {"batch": parse_id(batch_id, "batch")}
    found = await store._fetch("batch_progress", params, class_row(BatchProgress))
    return found[0] if found else None


def _rows_params(batch_id: str, rows: Sequence[StepRow], channel: str) -> dict[str, Any]:
    """The parameters of the part ``batch_rows`` for ``rows`` of ``batch_id``."""
    return {
        "batch": batch_id,
        "total": sum(1 for r in rows if not r.parents),
        "ids": text_array([r.job_id for r in rows]),
        "queues": text_array([r.queue for r in rows]),
        "job_types": text_array([r.job_type for r in rows]),
        "priorities": number_array([r.priority for r in rows]),
        "enqueued_at_ms": number_array([r.enqueued_at_ms for r in rows]),
        "parents": number_array([r.parents for r in rows]),
        "payloads": json.dumps([r.payload for r in rows], separators=(",", ":")),
        "steps": json.dumps([r.step for r in rows], separators=(",", ":")),
        "channel": channel,
    }
