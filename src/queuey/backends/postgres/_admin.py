"""Operations on a live queuey table: per-queue status, and inspecting, retrying and discarding
failed rows (``queuey status`` and ``queuey failed ...``).

Every call opens one short connection, checks the schema version and runs one named statement
from ``sql/queries.sql``. Retry and discard are a single ``UPDATE``/``DELETE ... WHERE status =
'failed'``, so they are safe while workers run: a row a worker holds is ``running``, never
``failed``, and two operators racing on one row touch it once. Times come from the database's
clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from queuey.backends.postgres._conninfo import connection_errors
from queuey.backends.postgres._migrate import check_schema
from queuey.backends.postgres._sql import Statements, check_identifier
from queuey.envelope import Kind
from queuey.errors import ConfigError
from queuey.secrets import remember

__all__ = ["Admin", "FailedRow", "QueueStatus", "RowDetail", "Touched"]


@dataclass(frozen=True)
class QueueStatus:
    """The live rows of one queue (queues holding only done rows are not listed).

    Attributes:
        kind: ``"job"`` or ``"topic"``.
        queue: the queue (or topic) name.
        pending: rows due now, waiting for a worker.
        scheduled: pending rows not yet due (delayed, or waiting for a retry).
        running: rows a worker holds.
        failed: rows that failed for good and wait for a person.
        oldest_pending_secs: how long the oldest due row has waited since it became due
            (seconds, database clock); ``None`` when nothing is due.
    """

    kind: Kind
    queue: str
    pending: int
    scheduled: int
    running: int
    failed: int
    oldest_pending_secs: float | None


@dataclass(frozen=True)
class FailedRow:
    """One failed row, summarised.

    Attributes:
        id: the row's (job's) id, a UUID string.
        kind: ``"job"`` or ``"topic"``.
        queue: the queue (or topic) name.
        job_type: the job's name (or the topic's subscriber).
        attempts: runs started.
        processed_at: when it failed (aware datetime; ``None`` if never recorded).
        error: the first line of its last error ("" when none).
    """

    id: str
    kind: Kind
    queue: str
    job_type: str
    attempts: int
    processed_at: datetime | None
    error: str


@dataclass(frozen=True)
class RowDetail:
    """Everything an operator needs to judge one row.

    Attributes:
        id, kind, queue, job_type: as in ``FailedRow``.
        status: ``pending``, ``running``, ``done`` or ``failed``.
        priority: the row's priority.
        attempts: runs started.
        redeliveries: leases that expired while it ran (a lost worker).
        deferrals: times the handler deferred it.
        payload: the job's fields (decoded JSON).
        headers: the envelope's headers (decoded JSON).
        published_by: who published a topic message ("" when unknown).
        error: the last error in full (``None`` when none).
        created_at, available_at, processed_at: aware datetimes (``processed_at`` may be
            ``None``).
    """

    id: str
    kind: Kind
    queue: str
    job_type: str
    status: str
    priority: int
    attempts: int
    redeliveries: int
    deferrals: int
    payload: Any
    headers: dict[str, Any]
    published_by: str
    error: str | None
    created_at: datetime
    available_at: datetime
    processed_at: datetime | None


@dataclass(frozen=True)
class Touched:
    """How many failed rows of one queue a retry or discard acted on."""

    kind: Kind
    queue: str
    count: int


def parse_id(row_id: str | uuid.UUID) -> str:
    """``row_id`` as a canonical UUID string.

    Raises:
        ConfigError: ``row_id`` is not a UUID.
    """
    if isinstance(row_id, uuid.UUID):
        return str(row_id)
    try:
        return str(uuid.UUID(row_id))
    except (ValueError, TypeError, AttributeError):
        raise ConfigError(f"{row_id!r} is not a job id (a UUID)") from None


class Admin:
    """Operations on one queuey table through short-lived connections.

    Args:
        conninfo: a libpq URL or key=value string.
        schema: the schema holding the table (validated identifier; default "queuey").
        table: the message table (default "queue_message").
        channel: the NOTIFY channel workers listen on (default ``<schema>_queue``, the
            backend's default); a retry wakes them through it. Topic subscribers listen on
            ``<prefix>_queue`` and pick a retried row up on their next poll otherwise.
        connect_timeout: give up connecting after this many seconds (default 10).

    Raises:
        ConfigError: a bad identifier.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "queuey",
        table: str = "queue_message",
        channel: str | None = None,
        connect_timeout: int = 10,
    ) -> None:
        self.conninfo = remember(conninfo) or conninfo
        self.statements = Statements(schema, table)
        self.channel = check_identifier(channel or f"{schema}_queue"[:63], "channel")
        self.connect_timeout = connect_timeout

    async def status(self) -> list[QueueStatus]:
        """Per (kind, queue) counts of live rows, ordered by kind then queue.

        Raises:
            BackendError: the database cannot be reached or the query failed.
            SchemaError: the schema is missing or older than this version needs.
        """
        rows = await self._rows("ops_status", {})
        return [QueueStatus(*row) for row in rows]

    async def failed(self, queue: str | None = None, *, limit: int | None = 100) -> list[FailedRow]:
        """Failed rows, oldest failure first.

        Args:
            queue: only this queue (any kind); ``None`` for all.
            limit: at most this many rows; ``None`` for all.

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        rows = await self._rows("ops_failed", {"queue": queue, "limit": limit})
        return [FailedRow(*row) for row in rows]

    async def show(self, row_id: str | uuid.UUID) -> RowDetail | None:
        """One row by id, whatever its status; ``None`` when there is no such row.

        Raises:
            ConfigError: ``row_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        rows = await self._rows("ops_show", {"id": parse_id(row_id)})
        return RowDetail(*rows[0]) if rows else None

    async def retry(self, row_id: str | uuid.UUID, *, queue: str | None = None) -> list[Touched]:
        """Put one failed row back to pending: due now, ``attempts`` and ``redeliveries`` 0, its
        last error kept, its workers woken. A row that is not failed is left alone.

        Args:
            row_id: the row's id.
            queue: act only if the row is on this queue.

        Returns:
            One ``Touched`` with count 1, or an empty list when nothing matched.

        Raises:
            ConfigError: ``row_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        return await self._act("ops_retry", parse_id(row_id), queue)

    async def retry_all(self, *, queue: str | None = None) -> list[Touched]:
        """Like ``retry`` for every failed row (of ``queue`` when given); counts per queue.

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        return await self._act("ops_retry", None, queue)

    async def discard(self, row_id: str | uuid.UUID, *, queue: str | None = None) -> list[Touched]:
        """Delete one failed row (only if on ``queue`` when given); a row that is not failed is
        left alone.

        Returns:
            One ``Touched`` with count 1, or an empty list when nothing matched.

        Raises:
            ConfigError: ``row_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        return await self._act("ops_discard", parse_id(row_id), queue)

    async def discard_all(self, *, queue: str | None = None) -> list[Touched]:
        """Delete every failed row (of ``queue`` when given); counts per queue.

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        return await self._act("ops_discard", None, queue)

    async def _act(self, name: str, row_id: str | None, queue: str | None) -> list[Touched]:
        params = {"id": row_id, "queue": queue, "channel": self.channel}
        return [Touched(*row) for row in await self._rows(name, params)]

    async def _rows(self, name: str, params: Mapping[str, object]) -> list[TupleRow]:
        with connection_errors(self.conninfo):
            async with await psycopg.AsyncConnection.connect(
                self.conninfo, autocommit=True, connect_timeout=self.connect_timeout
            ) as conn:
                await check_schema(conn, self.statements)
                cursor = await conn.execute(self.statements[name], params)
                return await cursor.fetchall()
