"""How ``PgDashboardStore`` runs a statement on its pool: the store opened first, database
failures raised as ``BackendError``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from psycopg import AsyncConnection, sql
from psycopg.rows import AsyncRowFactory, TupleRow, class_row
from psycopg_pool import AsyncConnectionPool

from queuey.backends.postgres._errors import database_errors

__all__ = ["StatementReads"]

_R = TypeVar("_R")


class StatementReads:
    """The statement runs of ``PgDashboardStore`` (its pool, its ``dashboard.sql`` statements
    by name and its ``open``)."""

    _pool: AsyncConnectionPool[AsyncConnection[TupleRow]]
    _statements: dict[str, sql.Composed]
    open: Callable[[], Awaitable[None]]

    async def _rows(self, name: str, params: Mapping[str, Any], row: type[_R]) -> list[_R]:
        """Every row of statement ``name``, each a ``row``."""
        return await self._fetch(self._statements[name], params, class_row(row))

    async def _fetch(
        self,
        statement: sql.SQL | sql.Composed,
        params: Mapping[str, Any],
        rows: AsyncRowFactory[_R],
    ) -> list[_R]:
        """Every row ``statement`` returns, each made by ``rows``.

        Raises:
            BackendError: the database cannot be reached or the statement failed.
        """
        await self.open()
        with database_errors():
            async with self._pool.connection() as conn:
                async with conn.cursor(row_factory=rows) as cursor:
                    await cursor.execute(statement, params)
                    return await cursor.fetchall()

    async def _execute(self, name: str, params: Mapping[str, Any]) -> Sequence[tuple[Any, ...]]:
        """Statement ``name``'s rows as tuples (none when it returns no rows)."""
        await self.open()
        with database_errors():
            async with self._pool.connection() as conn:
                cursor = await conn.execute(self._statements[name], params)
                return await cursor.fetchall() if cursor.description else []
