"""``ClaimConnections``: the pooled connections that claims run on, kept out of the pool and
each set once so that PostgreSQL plans the claim generically and never JIT-compiles it.

The claim is prepared (psycopg's prepared statements) and PostgreSQL decides at every bind
whether to re-plan it for the parameters at hand (a custom plan) or reuse one plan made for
any parameters (the generic plan, PostgreSQL's "Plan Cache Mode"). It keeps custom plans for
the claim, as the generic plan's estimate of a ``LIMIT`` parameter is pessimistic (10% of the
rows); planning the claim then costs about 0.4-0.9 ms of every wake-up, more than executing
it (docs/benchmarks.md, round 6). Every choice in the claim's plan follows from its shape
(each read is an index range in the claim index's order, bounded by ``LIMIT``; each row is
found again by primary key), so the generic plan is the plan a custom one would be, and its
cost does not move with the table's statistics: ``plan_cache_mode = force_generic_plan``.

A generic plan whose estimate crosses ``jit_above_cost`` is JIT-compiled at every execution
(PostgreSQL compiles per execution, not per plan): 20 ms of compiling for a 0.3 ms claim
beside a million due rows. The claim is short and runs thousands of times a minute, so these
connections set ``jit = off``.

Only claims run on these connections, so both settings touch nothing else. A claim that finds
every kept connection busy takes one more from the pool and keeps it afterwards, up to
``keep``; beyond that, the connection's settings are reset on its way back to the pool (one
round trip, no reconnection). A connection whose statement failed is closed and handed back,
never reused. A kept connection unused for ``IDLE_CHECK_SECS`` is checked before its next
claim, like a pooled one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import AsyncRowFactory
from psycopg_pool import AsyncConnectionPool

__all__ = ["CLAIM_RESET", "CLAIM_SETTINGS", "ClaimConnections", "after_lock"]

CLAIM_SETTINGS = "SET plan_cache_mode = force_generic_plan; SET jit = off"
"""What a connection is set to, once, before its first claim."""
CLAIM_RESET = "RESET plan_cache_mode; RESET jit"
"""What a connection handed back to the pool is reset with."""

Connection = psycopg.AsyncConnection[Any]
Hook = Callable[[Connection], Awaitable[None]]
R = TypeVar("R")


async def after_lock(
    conn: Connection,
    lock: sql.SQL,
    statement: sql.SQL | sql.Composed,
    params: Mapping[str, Any],
    rows: AsyncRowFactory[R],
) -> tuple[list[R], int]:
    """Run ``lock`` then ``statement`` (same ``params``) in one transaction, pipelined: BEGIN,
    both statements and COMMIT take two round trips instead of four. ``statement`` still takes
    its snapshot after ``lock`` is granted (each statement of a READ COMMITTED transaction takes
    its own when it starts). Returns ``statement``'s rows and row count."""
    async with conn.pipeline() as pipeline, conn.transaction():
        await conn.execute(lock, params)
        cursor = conn.cursor(row_factory=rows)
        await cursor.execute(statement, params)
        await pipeline.sync()
        found = await cursor.fetchall() if cursor.description is not None else []
        return found, cursor.rowcount


class ClaimConnections:
    """Up to ``keep`` connections of ``pool`` set for claims (``CLAIM_SETTINGS``).

    Args:
        pool: where the connections come from and go back to.
        keep: how many to keep between claims (claims running at once beyond that use a
            pooled connection each, set for the claim and reset afterwards).
        check: awaited on a kept connection before it is lent (the pool's idle check); raises
            if the connection is broken.
        used: awaited on a connection after a claim ran on it without failing.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        keep: int,
        check: Hook,
        used: Hook,
    ) -> None:
        self._pool = pool
        self._keep = keep
        self._check = check
        self._used = used
        self._free: list[Connection] = []
        self._thresholds: dict[int, int | None] = {}  # id(conn): its own prepare_threshold
        self._closed = False

    @property
    def keep(self) -> int:
        """How many connections are kept between claims."""
        return self._keep

    @asynccontextmanager
    async def lend(self, timeout: float | None) -> AsyncIterator[Connection]:
        """A connection for one claim, waiting at most ``timeout`` seconds for the pool
        (``None``: its default).

        Raises:
            psycopg_pool.PoolTimeout: no connection came in time.
            psycopg.Error: a fresh connection could not be set for claims.
        """
        conn = await self._lent(timeout)
        try:
            yield conn
        except BaseException:
            await self._discard(conn)
            raise
        await self._used(conn)
        if self._closed:
            await self._discard(conn)
        elif len(self._free) < self._keep:
            self._free.append(conn)
        else:
            await self._give_back(conn)

    async def close(self) -> None:
        """Hand every kept connection back (closed); one lent now is closed on its return."""
        self._closed = True
        free, self._free = self._free, []
        for conn in free:
            await self._discard(conn)

    async def _lent(self, timeout: float | None) -> Connection:
        conn: Connection
        while self._free:
            conn = self._free.pop()
            try:
                await self._check(conn)
            except Exception:  # broken while it waited (a restart, a firewall): next one
                await self._discard(conn)
                continue
            return conn
        conn = await self._pool.getconn(timeout)
        try:
            await conn.execute(CLAIM_SETTINGS)
        except BaseException:
            await self._discard(conn)
            raise
        self._thresholds[id(conn)] = conn.prepare_threshold
        conn.prepare_threshold = 0  # prepared from its first claim: planned once
        return conn

    async def _give_back(self, conn: Connection) -> None:
        """Hand ``conn`` back to the pool as it came: its settings reset (one round trip, no
        reconnection); closed instead if even that fails."""
        try:
            await conn.execute(CLAIM_RESET, prepare=False)  # two commands: never prepared
        except BaseException:
            await self._discard(conn)
            raise
        conn.prepare_threshold = self._thresholds.pop(id(conn), conn.prepare_threshold)
        await self._pool.putconn(conn)

    async def _discard(self, conn: Connection) -> None:
        """Close ``conn`` (its settings go with it) and hand it back: the pool replaces it."""
        self._thresholds.pop(id(conn), None)
        try:
            await conn.close()
        finally:
            await self._pool.putconn(conn)
