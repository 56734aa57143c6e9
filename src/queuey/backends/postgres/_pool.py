"""The connections the store runs statements on: the backend's pool (``Pool``) or a session's
one connection (``Lent``). Neither runs SQL of its own.

Checking every checkout (``AsyncConnectionPool.check_connection``) costs one round trip per
statement, doubling the round trips of the claim and settle paths. Instead a pooled connection
is checked only when it has sat idle for ``IDLE_CHECK_SECS`` (a firewall or a restart may have
cut it meanwhile), and the whole pool is checked (``recheck``) after any statement fails on a
broken connection, so a retry never lands on a connection that a database restart killed.

Publishes one after another reuse one pooled connection kept out of the pool: a publish that
finds it free skips the pool's checkout and return (a tenth of a single enqueue). It is checked
like a pooled one when it sat idle (a check that fails hands it back to the pool and the publish
takes a pooled connection), and a publish that fails on it hands it back to the pool too. A
publish waits for a connection at most its ``timeout`` (the backend's ``publish_timeout``):
when none comes, the database is unreachable (or every connection of a full pool stayed busy),
which ``no_connection`` says. Waiting for the answer is bounded by the store (``_answer``).
"""

from __future__ import annotations

import contextlib
import time
import weakref
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from queuey.backends.postgres._answer import checking
from queuey.backends.postgres._claiming import ClaimConnections
from queuey.backends.postgres._errors import DatabaseUnavailableError, no_connection, server_of
from queuey.backends.postgres._outage import POOL_NAME_PREFIX, POOLED, quiet_pool_logs

__all__ = ["CONNECT_TIMEOUT_SECS", "IDLE_CHECK_SECS", "Connection", "Connections", "Lent", "Pool"]

CONNECT_TIMEOUT_SECS = 10
"""libpq's ``connect_timeout`` of the pool's connections when the URL sets none: a connection
attempt into a network partition (nothing answers, nothing refuses) gives up after this long
and the pool tries again, instead of waiting minutes for TCP."""

IDLE_CHECK_SECS = 2.0
"""A pooled connection unused for longer than this (seconds) is checked before it is lent."""

Connection = psycopg.AsyncConnection[Any]

_last_used: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], float] = (
    weakref.WeakKeyDictionary()
)


async def _check_if_idle(conn: psycopg.AsyncConnection[Any]) -> None:
    if time.monotonic() - _last_used.get(conn, 0.0) > IDLE_CHECK_SECS:
        checking(conn)  # a bounded publish shuts it down if the check gets no answer
        await AsyncConnectionPool.check_connection(conn)


async def _mark_used(conn: psycopg.AsyncConnection[Any]) -> None:
    _last_used[conn] = time.monotonic()


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    POOLED.add(conn)  # psycopg's records about it are then quiet (``quiet_pool_logs``)


class Connections(Protocol):
    """Where a store's statements run."""

    def connection(self, timeout: float | None = None) -> AbstractAsyncContextManager[Connection]:
        """A connection for one statement, waiting at most ``timeout`` seconds for it
        (``None``: the pool's default)."""
        ...

    def publishing(self, timeout: float | None = None) -> AbstractAsyncContextManager[Connection]:
        """A connection for one publish, waiting at most ``timeout`` seconds for it (``None``:
        the pool's default).

        Raises:
            DatabaseUnavailableError: (on entering) no connection within ``timeout``.
        """
        ...

    def claiming(self, timeout: float | None = None) -> AbstractAsyncContextManager[Connection]:
        """A connection for one claim (``_claiming``), waiting at most ``timeout`` seconds."""
        ...

    async def recheck(self) -> None:
        """A statement failed on a broken connection: drop the others that are broken too."""
        ...

    async def open(self) -> None:
        """Start lending connections."""
        ...

    async def close(self) -> None:
        """Stop lending connections."""
        ...


class Lent:
    """A session's one connection, lent to each statement and never closed by it."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def connection(self, timeout: float | None = None) -> Lent:
        return self

    def publishing(self, timeout: float | None = None) -> Lent:
        return self

    def claiming(self, timeout: float | None = None) -> Lent:
        return self

    async def recheck(self) -> None:
        return None

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None  # the session that opened the connection closes it

    async def __aenter__(self) -> Connection:
        return self.conn

    async def __aexit__(self, *exc_info: object) -> None:
        return None


def _pool_name(application_name: str) -> str:
    if application_name.startswith(POOL_NAME_PREFIX):
        return application_name
    return f"{POOL_NAME_PREFIX} {application_name}"


def _connect_timeout(conninfo: str) -> dict[str, Any]:
    """``connect_timeout`` for the pool's connections, unless ``conninfo`` sets one."""
    try:
        given = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return {}
    return {} if "connect_timeout" in given else {"connect_timeout": CONNECT_TIMEOUT_SECS}


class Pool:
    """An autocommit pool of 1..``max_size`` connections named ``application_name``, opened by
    ``open``, plus the connection kept for publishes and those kept for claims
    (``_claiming``). psycopg's log records name the pool like its connections (prefixed
    "queuey" if they are not), and its per-attempt reconnection warnings are DEBUG records (the
    backend logs one line per outage).

    ``pooled_server``: the connections reach PostgreSQL through a transaction-mode pooler
    (PgBouncer), where each transaction may run on another server connection, shared with other
    clients. Nothing may then outlive a transaction: no claim connections with their session
    settings, and no prepared statements (psycopg's ``prepare_threshold = None``; a statement
    prepared on one server connection does not exist on the next, as psycopg's documentation
    on PgBouncer says).
    """

    def __init__(
        self,
        conninfo: str,
        max_size: int,
        application_name: str,
        *,
        pooled_server: bool = False,
    ) -> None:
        quiet_pool_logs()
        self._pool = AsyncConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            open=False,
            name=_pool_name(application_name),
            kwargs={
                "autocommit": True,
                "application_name": application_name[:63],
                **({"prepare_threshold": None} if pooled_server else {}),
                **_connect_timeout(conninfo),
            },
            check=_check_if_idle,
            reset=_mark_used,
            configure=_configure,
        )
        self._server = server_of(conninfo)
        self._kept: Connection | None = None
        self._kept_busy = False
        keep = 0 if pooled_server else max_size // 4
        self._claims = ClaimConnections(self._pool, keep, _check_if_idle, _mark_used)

    async def open(self) -> None:
        """Open the pool without waiting for its first connection."""
        await self._pool.open(wait=False)

    async def close(self) -> None:
        """Give the kept connections back and close the pool."""
        await self._claims.close()
        kept, self._kept = self._kept, None
        if kept is not None:
            await self._pool.putconn(kept)
        await self._pool.close()

    def connection(self, timeout: float | None = None) -> AbstractAsyncContextManager[Connection]:
        return self._pool.connection(timeout=timeout)

    def claiming(self, timeout: float | None = None) -> AbstractAsyncContextManager[Connection]:
        """A connection set for claims (``_claiming``); a pooled one when the pool is too
        small to keep one aside (fewer than 4 connections) or claims keep no settings."""
        if self._claims.keep == 0:
            return self._pool.connection(timeout=timeout)
        return self._claims.lend(timeout)

    def publishing(self, timeout: float | None = None) -> AbstractAsyncContextManager[Connection]:
        """The kept connection when it is free (and answers, if it sat idle), else a pooled one
        waiting at most ``timeout`` seconds (after which a connection is kept, if none is)."""
        return _Publishing(self, timeout)

    def no_connection(self, waited: float) -> DatabaseUnavailableError:
        """The error of a checkout that found no connection within ``waited`` seconds: the
        database is unreachable, or every connection of the full pool stayed busy."""
        stats = self._pool.get_stats()
        size = stats.get("pool_size", 0)
        busy = size if size >= self._pool.max_size and not stats.get("pool_available") else 0
        return no_connection(self._server, waited, busy=busy)

    async def recheck(self) -> None:
        with contextlib.suppress(Exception):
            await self._pool.check()


class _Publishing:
    """A loan for one publish: the kept connection when it is free (checked first when it sat
    idle: a broken one goes back to the pool), else a pooled one; a statement failing on the
    kept connection sends it back to the pool, and a pooled loan that went well keeps one."""

    def __init__(self, pool: Pool, timeout: float | None) -> None:
        self._owner = pool
        self._timeout = timeout
        self._kept: Connection | None = None
        self._loan: AbstractAsyncContextManager[Connection] | None = None

    async def __aenter__(self) -> Connection:
        owner = self._owner
        kept = owner._kept
        if kept is not None and not owner._kept_busy:
            owner._kept_busy = True
            try:
                await _check_if_idle(kept)
            except Exception:  # cut while idle (a restart, a firewall): the pool checks it
                owner._kept, owner._kept_busy = None, False
                await owner._pool.putconn(kept)
            else:
                self._kept = kept
                return kept
        self._loan = owner._pool.connection(timeout=self._timeout)
        try:
            return await self._loan.__aenter__()
        except PoolTimeout:
            waited = owner._pool.timeout if self._timeout is None else self._timeout
            raise owner.no_connection(waited) from None

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: Any) -> None:
        owner, kept = self._owner, self._kept
        if kept is not None:
            owner._kept_busy = False
            if exc_type is None:
                _last_used[kept] = time.monotonic()
            else:  # maybe broken: back to the pool, which checks it
                owner._kept = None
                await owner._pool.putconn(kept)
            return
        loan = self._loan
        if loan is None:
            return
        try:
            if exc_type is None and owner._kept is None and not owner._kept_busy:
                with contextlib.suppress(Exception):
                    owner._kept = await owner._pool.getconn(timeout=0.1)
                    _last_used[owner._kept] = time.monotonic()
        finally:
            await loan.__aexit__(exc_type, *rest)
