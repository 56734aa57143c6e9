"""The store: every statement the PostgreSQL backend runs, one typed method per named query of
``sql/queries.sql``, rows returned as the frozen dataclasses of ``_rows.py``, and one error
policy for all of them (``_errors.database_errors``). This module runs statements and holds
the store's lifecycle and LISTEN session; the statements come in groups by concern, which
``Store`` inherits: inserting rows (``_enqueue_statements``), claiming and settling one run and
maintaining claims (``_claim_statements``), settling many at once (``_settles``), inspection
and operations (``_inspections``), the schema (``_schema_statements``) and schedules
(``_schedule_statements``).

A store runs its statements on the backend's pool (``_pool.Pool``), or, inside ``session()``,
on one dedicated connection (schema check, migrations, LISTEN, operations). It retries and logs
nothing: a failure is a ``BackendError``, after which a pooled store checks its idle
connections (a restart kills them all). Callers decide what a failure means: consumers and
maintenance log it once per outage, settles retry it, publishes and inspections raise it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import AsyncRowFactory, tuple_row

from queuey.backends.postgres._answer import answered, no_answer, publish_bound
from queuey.backends.postgres._claim_statements import BACKGROUND_TIMEOUT, ClaimStatements
from queuey.backends.postgres._claiming import after_lock
from queuey.backends.postgres._enqueue_statements import EnqueueStatements, PublishQuery
from queuey.backends.postgres._errors import (
    DatabaseUnavailableError,
    database_errors,
    server_of,
)
from queuey.backends.postgres._flow import FlowClaims
from queuey.backends.postgres._inspections import InspectionStatements
from queuey.backends.postgres._pool import Connection, Connections, Lent
from queuey.backends.postgres._schedule_statements import ScheduleStatements
from queuey.backends.postgres._schema_statements import SchemaStatements, schema_error
from queuey.backends.postgres._settles import SettleStatements
from queuey.backends.postgres._sql import Statements
from queuey.limits import ThrottleTally
from queuey.secrets import remember

log = logging.getLogger("queuey.postgres")

__all__ = ["BACKGROUND_TIMEOUT", "Params", "PublishQuery", "Store", "schema_error"]

R = TypeVar("R")
Params = dict[str, Any]


class Store(
    EnqueueStatements,
    ClaimStatements,
    SettleStatements,
    InspectionStatements,
    SchemaStatements,
    ScheduleStatements,
):
    """The statements of one queuey table.

    Args:
        statements: the table's composed statements.
        conninfo: a libpq URL or key=value string (its password is remembered for redaction).
        connections: where statements run (the backend's ``Pool``, a session's ``Lent``);
            ``None`` for a store used only through ``session()``.
        owner: this process's identity, with ``attempts`` the fencing token of its claims.
        lease: how long a claim or a heartbeat holds a row (seconds).
        publish_timeout: how long a publish on a connection of the store waits for one
            (seconds; ``None``: the pool's default). A publish on the caller's connection
            runs as that connection does.
        channel: the typed queues' NOTIFY channel, woken when a debounced job ends (its
            successor may run).
    """

    def __init__(
        self,
        statements: Statements,
        conninfo: str,
        connections: Connections | None = None,
        *,
        owner: str = "",
        lease: float = 0.0,
        publish_timeout: float | None = None,
        channel: str = "",
    ) -> None:
        self.statements = statements
        self.channel = channel
        self.owner = owner
        self.lease = lease
        self.publish_timeout = publish_timeout
        self.flow = FlowClaims(ThrottleTally())  # which claim runs; what limits held back
        self._conninfo = conninfo
        remember(conninfo)
        self._connections = connections

    # -- running statements --------------------------------------------------------------------

    def _where(self) -> Connections:
        if self._connections is None:
            raise RuntimeError("this store runs statements only inside session()")
        return self._connections

    async def _answered(self, work: Callable[[Connection], Awaitable[R]], count: int) -> R:
        """``work`` on the publishing connection, answered within the bound of a publish of
        ``count`` rows (``_answer``; a session's own connection is not bounded)."""
        where = self._where()
        loan = where.publishing(self.publish_timeout)
        bound = None if isinstance(where, Lent) else publish_bound(self.publish_timeout, count)
        server = server_of(self._conninfo)
        return await answered(loan, work, bound, lambda waited: no_answer(server, waited))

    async def _run(
        self,
        statement: sql.SQL | sql.Composed,
        params: Params | None,
        rows: AsyncRowFactory[R],
        timeout: float | None = None,
        *,
        claim: bool = False,
        first: sql.SQL | None = None,
    ) -> tuple[list[R], int]:
        """Run one statement; returns its rows (none without a result) and its row count.
        ``claim``: on a connection set for claims (``_claiming``). ``first``: a statement run
        before it, with the same parameters, in one transaction (a limited claim's lock).

        Raises:
            BackendError: as ``database_errors`` maps it.
        """
        where = self._where()
        lend = where.claiming if claim else where.connection
        try:
            with database_errors():
                async with lend(timeout) as conn:
                    if first is None or params is None:
                        return await _statement(conn, statement, params, rows)
                    return await after_lock(conn, first, statement, params, rows)
        except DatabaseUnavailableError:
            await where.recheck()
            raise

    async def _fetch(
        self,
        name: str,
        params: Params | None,
        rows: AsyncRowFactory[R],
        timeout: float | None = None,
    ) -> list[R]:
        """The rows of the named statement."""
        found, _ = await self._run(self.statements[name], params, rows, timeout)
        return found

    async def _count(self, name: str, params: Params | None, timeout: float | None = None) -> int:
        """The row count of the named statement."""
        _, count = await self._run(self.statements[name], params, tuple_row, timeout)
        return count

    @asynccontextmanager
    async def session(
        self,
        *,
        check_schema: bool = True,
        transaction: bool = False,
        connect_timeout: int | None = 10,
        application_name: str | None = None,
    ) -> AsyncIterator[Store]:
        """A store bound to one new connection (autocommit), closed on exit.

        Args:
            check_schema: first refuse a schema older than this queuey needs.
            transaction: run everything in one transaction (committed on a clean exit).
            connect_timeout: give up connecting after this many seconds (``None``: libpq's).
            application_name: the name the session shows in ``pg_stat_activity``.

        Raises:
            BackendError: the connection failed, or a statement did (also the body's).
            SchemaError: the schema is missing or behind.
        """
        options: dict[str, Any] = {"autocommit": True}
        if connect_timeout is not None:
            options["connect_timeout"] = connect_timeout
        if application_name is not None:
            options["application_name"] = application_name[:63]
        with database_errors():
            async with await psycopg.AsyncConnection.connect(self._conninfo, **options) as conn:
                bound = Store(
                    self.statements,
                    self._conninfo,
                    Lent(conn),
                    owner=self.owner,
                    lease=self.lease,
                    channel=self.channel,
                )
                if check_schema:
                    await bound.check_schema()
                if not transaction:
                    yield bound
                    return
                async with conn.transaction():
                    yield bound

    # -- lifecycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Check the schema on a connection of its own, then open the pool (without waiting
        for its connections).

        Raises:
            BackendError: the database cannot be reached.
            SchemaError: the schema is missing or behind.
        """
        async with self.session():
            pass
        with database_errors():
            await self._where().open()

    async def close(self) -> None:
        """Close the pool (a session closes with its block)."""
        if self._connections is not None:
            await self._connections.close()

    # -- the LISTEN session --------------------------------------------------------------------

    async def listen(self, channels: Sequence[str]) -> None:
        """``listen`` on each of ``channels``."""
        for channel in channels:
            await self._run(self.statements.listen(channel), None, tuple_row)

    async def notifications(self, timeout: float) -> AsyncIterator[tuple[str, str]]:
        """``(channel, payload)`` of each notification the session receives within ``timeout``
        seconds (a session's; its ``database_errors`` maps a failure)."""
        if not isinstance(self._connections, Lent):
            raise RuntimeError("only a session has a connection of its own")
        async for notify in self._connections.conn.notifies(timeout=timeout):
            yield notify.channel, notify.payload

    async def ping(self) -> None:
        """``ping``: one round trip."""
        await self._count("ping", None)


async def _statement(
    conn: Connection,
    statement: sql.SQL | sql.Composed,
    params: Params | None,
    rows: AsyncRowFactory[R],
) -> tuple[list[R], int]:
    """Run ``statement`` on ``conn``: its rows (none without a result) and its row count."""
    cursor = conn.cursor(row_factory=rows)
    await cursor.execute(statement, params)
    found = await cursor.fetchall() if cursor.description is not None else []
    return found, cursor.rowcount
