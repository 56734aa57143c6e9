"""The synchronous twin of the store's publishing half: the same named statements of
``sql/queries.sql`` (``publish``, ``publish_one``, ``publish_job``, ``publish_unique``,
``cancel``, ``schema_version``), run on psycopg's synchronous ``ConnectionPool`` or on the
caller's own synchronous connection, with the store's one error policy
(``_errors.database_errors``).

It serves ``SyncPostgresBackend`` (``queuey.sync``), for code with no event loop: a Django
view, a Flask handler, a script. The caller's connection may be a psycopg ``Connection`` or
Django's ``django.db.connection`` (on psycopg 3): the statement then runs in whatever
transaction that connection is in (``transaction.atomic()``), and commits or rolls back with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import class_row, scalar_row
from psycopg_pool import ConnectionPool, PoolTimeout

from queuey.backends.base import JobInfo
from queuey.backends.postgres._errors import (
    DatabaseUnavailableError,
    UndefinedTableError,
    database_errors,
    no_connection,
    server_of,
)
from queuey.backends.postgres._rows import Enqueued, job_info
from queuey.backends.postgres._sql import Statements
from queuey.backends.postgres._store import Params, PublishQuery, schema_error
from queuey.secrets import remember

__all__ = ["SyncStore", "caller_connection"]

SyncConnection = psycopg.Connection[Any]
T = TypeVar("T")


def caller_connection(connection: object) -> SyncConnection:
    """The psycopg ``Connection`` behind what a caller passed: a psycopg ``Connection`` as is,
    or Django's database wrapper (``django.db.connection``: connected if it was not, then its
    ``.connection``), so a job commits with the caller's transaction.

    Raises:
        TypeError: anything else (an ``AsyncConnection`` belongs to the async ``Producer``;
            a Django database on psycopg 2 or another engine has no psycopg 3 connection).
    """
    if isinstance(connection, psycopg.Connection):
        return connection
    ensure = getattr(connection, "ensure_connection", None)
    if callable(ensure):  # Django's DatabaseWrapper
        ensure()
        raw = getattr(connection, "connection", None)
        if isinstance(raw, psycopg.Connection):
            return raw
        raise TypeError(
            "this Django database does not run on psycopg 3 (django.db.backends.postgresql "
            f"with psycopg installed); its connection is a {type(raw).__name__}"
        )
    raise TypeError(
        "connection must be a psycopg Connection or Django's django.db.connection, got "
        f"{type(connection).__name__}"
    )


class SyncStore:
    """The publishing statements of one queuey table, run synchronously.

    Args:
        statements: the table's composed statements.
        conninfo: a libpq URL or key=value string (its password is remembered for redaction).
        pool_size: the pool's maximum size.
        application_name: what its connections show in ``pg_stat_activity``.
        connect_timeout: give up connecting after this many seconds.
        publish_timeout: how long a publish on a pooled connection waits for one (seconds).
    """

    def __init__(
        self,
        statements: Statements,
        conninfo: str,
        *,
        pool_size: int,
        application_name: str,
        connect_timeout: int,
        publish_timeout: float = 5.0,
    ) -> None:
        self.statements = statements
        remember(conninfo)
        self._server = server_of(conninfo)
        self._timeout = float(connect_timeout)
        self.publish_timeout = publish_timeout
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=pool_size,
            open=False,
            timeout=self._timeout,
            kwargs={
                "autocommit": True,
                "application_name": application_name[:63],
                "connect_timeout": connect_timeout,
            },
        )

    def open(self) -> None:
        """Open the pool and refuse a schema older than this queuey needs.

        Raises:
            BackendError: the database cannot be reached.
            SchemaError: the schema is missing or behind; the message says to migrate it.
        """
        with database_errors():
            self._pool.open(wait=False)
        try:
            self._check_schema()
        except BaseException:
            self._pool.close()  # no thread left retrying to connect
            raise

    def _check_schema(self) -> None:
        """Refuse a schema lacking any migration (the store's rule, ``schema_error``).

        Raises:
            SchemaError: the schema is missing or lacks a migration.
        """
        try:
            applied = {int(v) for v in self._fetch("applied_versions", None)}
        except UndefinedTableError:
            applied = set()
        error = schema_error(self.statements.schema, applied)
        if error is not None:
            raise error

    def close(self) -> None:
        """Close the pool."""
        self._pool.close()

    def _fetch(self, name: str, params: Params | None) -> list[Any]:
        """The first column of the rows of the named statement, on a pooled connection.

        Raises:
            BackendError: as ``database_errors`` maps it.
        """
        return self._on_pool(lambda conn: _scalars(conn, self.statements[name], params))

    def _on_pool(self, work: Callable[[SyncConnection], T], timeout: float | None = None) -> T:
        """``work`` on a pooled connection, waiting at most ``timeout`` seconds for one
        (``None``: the pool's default); after a lost connection the pool checks the rest.

        Raises:
            DatabaseUnavailableError: no connection within ``timeout`` (``no_connection``).
            BackendError: as ``database_errors`` maps it.
        """
        try:
            with database_errors():
                conn = self._checkout(timeout)
                try:
                    return work(conn)
                finally:
                    self._pool.putconn(conn)
        except DatabaseUnavailableError:
            self._pool.check()
            raise

    def _checkout(self, timeout: float | None) -> SyncConnection:
        """A pooled connection within ``timeout`` seconds (``None``: the pool's default).

        Raises:
            DatabaseUnavailableError: none came (``no_connection``).
        """
        try:
            return self._pool.getconn(timeout)
        except PoolTimeout:
            waited = self._pool.timeout if timeout is None else timeout
            stats = self._pool.get_stats()
            size = stats.get("pool_size", 0)
            full = size >= self._pool.max_size and not stats.get("pool_available")
            raise no_connection(self._server, waited, busy=size if full else 0) from None

    def publish(
        self, query: PublishQuery, params: Params, connection: SyncConnection | None = None
    ) -> None:
        """Insert rows and notify with ``query``, all or nothing: on ``connection`` (the
        caller's transaction) or on a pooled connection.

        Raises:
            DatabaseUnavailableError: no pooled connection within ``publish_timeout``;
                nothing was written.
            BackendError: nothing was written (on the caller's connection, its transaction
                is then aborted, as for any failed statement).
        """
        statement = self.statements[query]
        if connection is not None:
            with database_errors():
                connection.execute(statement, params)
            return
        self._on_pool(lambda conn: conn.execute(statement, params).rowcount, self.publish_timeout)

    def publish_unique(
        self, params: Params, connection: SyncConnection | None = None
    ) -> list[Enqueued]:
        """``publish_unique``: as ``Store.publish_unique``, on ``connection`` (the caller's
        transaction) or on a pooled connection (within ``publish_timeout``).

        Raises:
            DatabaseUnavailableError, BackendError: as for ``publish``; nothing was written.
        """
        statement = self.statements["publish_unique"]

        def run(conn: SyncConnection) -> list[Enqueued]:
            cursor = conn.cursor(row_factory=class_row(Enqueued))
            cursor.execute(statement, params)
            return cursor.fetchall()

        if connection is not None:
            with database_errors():
                return run(connection)
        return self._on_pool(run, self.publish_timeout)

    def cancel(self, row_id: str, channel: str, wake_channel: str) -> str | None:
        """``cancel``: as ``Store.cancel`` (a running row's owner told on ``channel``; the
        queues of workflow steps it releases woken on ``wake_channel``); returns the status
        the row had, ``None`` when no row could be cancelled."""
        params = {"id": row_id, "channel": channel, "wake_channel": wake_channel}
        rows = self._fetch("cancel", params)
        return str(rows[0]) if rows else None

    def job_info(self, job_id: str) -> JobInfo | None:
        """``job_info``: as ``Store.job_info``."""
        return self._on_pool(lambda conn: _job_info(conn, self.statements["job_info"], job_id))


def _job_info(conn: SyncConnection, statement: sql.SQL, job_id: str) -> JobInfo | None:
    cursor = conn.cursor(row_factory=class_row(JobInfo))
    cursor.execute(statement, {"id": job_id})
    row = cursor.fetchone()
    return None if row is None else job_info(row)


def _scalars(conn: SyncConnection, statement: sql.SQL, params: Params | None) -> list[Any]:
    cursor = conn.cursor(row_factory=scalar_row)
    cursor.execute(statement, params)
    return cursor.fetchall() if cursor.description is not None else []
