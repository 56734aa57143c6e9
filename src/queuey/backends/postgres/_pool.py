"""The backend's connection pool, and when a pooled connection is checked before use.

Checking every checkout (``AsyncConnectionPool.check_connection``) costs one round trip per
statement, doubling the round trips of the claim and settle paths. Instead a connection is
checked only when it has sat idle for ``IDLE_CHECK_SECS`` (a firewall or a restart may have cut
it meanwhile), and the whole pool is checked after any statement fails on a broken connection,
so a retry never lands on a connection that a database restart already killed.
"""

from __future__ import annotations

import time
import weakref

import psycopg
from psycopg_pool import AsyncConnectionPool

__all__ = ["IDLE_CHECK_SECS", "make_pool"]

IDLE_CHECK_SECS = 2.0
"""A pooled connection unused for longer than this (seconds) is checked before it is lent."""

_last_used: weakref.WeakKeyDictionary[psycopg.AsyncConnection[object], float] = (
    weakref.WeakKeyDictionary()
)


async def _check_if_idle(conn: psycopg.AsyncConnection[object]) -> None:
    if time.monotonic() - _last_used.get(conn, 0.0) > IDLE_CHECK_SECS:
        await AsyncConnectionPool.check_connection(conn)


async def _mark_used(conn: psycopg.AsyncConnection[object]) -> None:
    _last_used[conn] = time.monotonic()


def make_pool(conninfo: str, max_size: int, application_name: str) -> AsyncConnectionPool:
    """An unopened autocommit pool of 1..``max_size`` connections named ``application_name``."""
    return AsyncConnectionPool(
        conninfo,
        min_size=1,
        max_size=max_size,
        open=False,
        kwargs={"autocommit": True, "application_name": application_name[:63]},
        check=_check_if_idle,
        reset=_mark_used,
    )
