"""The statements that insert rows: ``publish`` (and its variants), the COPY publish of a
large batch, and the inserts under a unique or idempotency key; each on the caller's
connection (its transaction) or on the store's publishing connection, answered within the
bound of its row count (``_answer``). Part of ``Store`` (``Store`` inherits them); run only
through it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import AsyncRowFactory, class_row

from queuey.backends.postgres._answer import NoAnswerError
from queuey.backends.postgres._arrays import text_array
from queuey.backends.postgres._errors import DatabaseUnavailableError, database_errors
from queuey.backends.postgres._pool import Connection
from queuey.backends.postgres._rows import Enqueued, FirstUse
from queuey.backends.postgres._statement_runner import StatementRunner

__all__ = ["EnqueueStatements", "PublishQuery"]

R = TypeVar("R")
Params = dict[str, Any]
PublishQuery = Literal["publish", "publish_one", "publish_job", "start_workflow", "start_batch"]
"""The three statements that insert rows (``_publish.py`` says which fits)."""
UniqueQuery = Literal["publish_unique", "publish_once", "add_to_batch"]
"""The statements that insert rows under a unique or idempotency key and say what they did."""


class EnqueueStatements(StatementRunner):
    """``Store``'s statements that insert rows (see the module)."""

    async def publish(
        self,
        query: PublishQuery,
        params: Params,
        connection: Connection | None = None,
        count: int = 1,
    ) -> None:
        """Insert rows and notify their queues with ``query``, all or nothing: on
        ``connection`` (the caller's transaction) or on a connection of the store, waiting for
        the answer at most the bound of ``count`` rows (``publish_bound``).

        Raises:
            DatabaseUnavailableError: no connection, or no answer within the bound (then the
                rows may or may not have been written).
            BackendError: nothing was written.
        """
        await self._publishing(query, params, connection, None, count)

    async def _publishing(
        self,
        query: PublishQuery | UniqueQuery,
        params: Params,
        connection: Connection | None,
        rows: AsyncRowFactory[R] | None,
        count: int = 1,
    ) -> list[R]:
        """Run a publishing statement on ``connection`` or the publishing connection; its rows
        with ``rows`` (none without)."""
        statement = self.statements[query]
        try:
            with database_errors():
                if connection is not None:
                    return await _execute(connection, statement, params, rows)
                return await self._answered(
                    lambda conn: _execute(conn, statement, params, rows), count
                )
        except NoAnswerError:
            raise  # checking the pool now would wait on the same silence
        except DatabaseUnavailableError:
            await self._where().recheck()
            raise

    async def publish_copy(
        self,
        data: str,
        queues: Sequence[str],
        channel: str,
        connection: Connection | None,
        count: int = 1,
    ) -> None:
        """``publish_copy`` then ``notify_queues``, in one transaction (the caller's, when
        ``connection`` is given): all or nothing, on ``connection`` or the publishing
        connection.

        Args:
            data: the rows in COPY's text format (``copy_rows``).
            queues: the queues to wake.
            channel: the NOTIFY channel.

        Raises:
            BackendError: nothing was written.
        """
        try:
            with database_errors():
                if connection is not None:
                    await self._copy(connection, data, queues, channel)
                    return
                await self._answered(lambda conn: self._copy(conn, data, queues, channel), count)
        except NoAnswerError:
            raise  # checking the pool now would wait on the same silence
        except DatabaseUnavailableError:
            await self._where().recheck()
            raise

    async def _copy(self, conn: Connection, data: str, queues: Sequence[str], channel: str) -> None:
        """The two statements of a COPY publish: in a transaction of their own on an
        autocommit connection outside one, else in the transaction the connection is in (or
        begins: a caller's non-autocommit connection), which they join like any statement."""
        if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
            async with conn.transaction():
                await self._copy(conn, data, queues, channel)
            return
        async with conn.cursor().copy(self.statements["publish_copy"]) as copy:
            await copy.write(data)
        params = {"channel": channel, "queues": text_array(queues)}
        await conn.execute(self.statements["notify_queues"], params)

    async def publish_unique(
        self, params: Params, connection: Connection | None, count: int = 1
    ) -> list[Enqueued]:
        """``publish_unique``: insert rows unless their unique key is held; per row, in order,
        the id written or found and whether it was inserted.

        Raises:
            BackendError: nothing was written.
        """
        rows = class_row(Enqueued)
        return await self._publishing("publish_unique", params, connection, rows, count)

    async def publish_once(
        self, params: Params, connection: Connection | None, count: int = 1
    ) -> FirstUse:
        """``publish_once``: insert rows unless the idempotency key was used within the window;
        the key's first publication either way.

        Raises:
            BackendError: nothing was written.
        """
        first = class_row(FirstUse)
        rows = await self._publishing("publish_once", params, connection, first, count)
        return rows[0]


async def _execute(
    conn: Connection, statement: sql.SQL, params: Params, rows: AsyncRowFactory[R] | None
) -> list[R]:
    """Run ``statement`` on ``conn``; its rows with ``rows`` (nothing when ``None``)."""
    if rows is None:
        await conn.execute(statement, params)
        return []
    cursor = conn.cursor(row_factory=rows)
    await cursor.execute(statement, params)
    return await cursor.fetchall()
