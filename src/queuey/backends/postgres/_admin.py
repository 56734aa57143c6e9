"""Operations on a live queuey table: per-queue status, and inspecting, retrying and discarding
failed rows (``queuey status`` and ``queuey failed ...``).

Every call opens one short connection (a store session), checks the schema version and runs
one named statement from ``sql/queries.sql`` through the store. Retry and discard are a single
``UPDATE``/``DELETE ... WHERE status = 'failed'``, so they are safe while workers run: a row a
worker holds is ``running``, never ``failed``, and two operators racing on one row touch it
once. Times come from the database's clock.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager

from queuey._validation import check_int
from queuey.backends.base import JobInfo
from queuey.backends.postgres._rows import FailedRow, QueueStatus, RowDetail, Touched
from queuey.backends.postgres._sql import Statements, check_identifier
from queuey.backends.postgres._store import Store
from queuey.errors import ConfigError
from queuey.secrets import remember

__all__ = ["Admin", "FailedRow", "QueueStatus", "RowDetail", "Touched"]


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
        channel: the NOTIFY channel workers listen on (default ``<schema>_jobs``, the
            backend's default); a retry wakes them through it. Topic subscribers listen on
            ``<prefix>_queue`` and pick a retried row up on their next poll otherwise.
        connect_timeout: give up connecting after this many seconds (default 10; 0 waits
            as long as libpq does).

    Raises:
        ConfigError: a bad identifier or timeout (the message names it).
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
        self.channel = check_identifier(channel or f"{schema}_jobs"[:63], "channel")
        self.connect_timeout = check_int(connect_timeout, "connect_timeout", low=0)
        self._store = Store(self.statements, self.conninfo)

    def _session(self) -> AbstractAsyncContextManager[Store]:
        """A short connection whose schema was checked."""
        return self._store.session(connect_timeout=self.connect_timeout)

    async def status(self) -> list[QueueStatus]:
        """Per (kind, queue) counts of live rows, ordered by kind then queue.

        Raises:
            BackendError: the database cannot be reached or the query failed.
            SchemaError: the schema is missing or older than this version needs.
        """
        async with self._session() as store:
            return await store.ops_status()

    async def failed(self, queue: str | None = None, *, limit: int | None = 100) -> list[FailedRow]:
        """Failed rows, oldest failure first.

        Args:
            queue: only this queue (any kind); ``None`` for all.
            limit: at most this many rows; ``None`` for all.

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            return await store.ops_failed(queue, limit)

    async def show(self, row_id: str | uuid.UUID) -> RowDetail | None:
        """One row by id, whatever its status; ``None`` when there is no such row.

        Raises:
            ConfigError: ``row_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        row_id = parse_id(row_id)
        async with self._session() as store:
            return await store.ops_show(row_id)

    async def job(self, job_id: str | uuid.UUID) -> JobInfo | None:
        """One job (or topic message) by id, whatever its state; ``None`` when there is none.

        Raises:
            ConfigError: ``job_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        job_id = parse_id(job_id)
        async with self._session() as store:
            return await store.job_info(job_id)

    async def queue_exists(self, queue: str) -> bool:
        """Whether any row (of any status) is on ``queue``.

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            return await store.queue_exists(queue)

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
        row_id = parse_id(row_id)
        async with self._session() as store:
            return await store.ops_retry(row_id, queue, self.channel)

    async def retry_all(self, *, queue: str | None = None) -> list[Touched]:
        """Like ``retry`` for every failed row (of ``queue`` when given); counts per queue.

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            return await store.ops_retry(None, queue, self.channel)

    async def discard(self, row_id: str | uuid.UUID, *, queue: str | None = None) -> list[Touched]:
        """Delete one failed row (only if on ``queue`` when given); a row that is not failed is
        left alone.

        Returns:
            One ``Touched`` with count 1, or an empty list when nothing matched.

        Raises:
            ConfigError: ``row_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        row_id = parse_id(row_id)
        async with self._session() as store:
            return await store.ops_discard(row_id, queue)

    async def discard_all(self, *, queue: str | None = None) -> list[Touched]:
        """Delete every failed row (of ``queue`` when given); counts per queue.

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            return await store.ops_discard(None, queue)
