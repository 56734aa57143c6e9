"""A publish on a connection of the backend's pool waits for the database's answer at most
its bound (``publish_bound``: ``publish_timeout``, plus ``ROW_ALLOWANCE_SECS`` per row of a
batch).

A database that stops answering on an open connection (packets swallowed by a network
partition, a frozen server) does not reset it: a read waits until TCP gives up, minutes later.
Cancelling the statement does not help either: psycopg then sends a cancel request (over a new
connection that cannot get through either) and waits for the statement to end. So the
statement runs in a task of its own; when the bound passes first, its connection's socket is
shut down (the statement then fails at once, with no cancel request) and the connection is
closed: the pool discards it, no later statement waits on it.

The statement may have reached the server and committed before the answer was lost: the job
may or may not have been written (``no_answer`` says so; a retry is at-least-once, made safe by
a unique or idempotency key).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import psycopg

from queuey.backends.postgres._errors import DatabaseUnavailableError

__all__ = [
    "ROW_ALLOWANCE_SECS",
    "NoAnswerError",
    "answered",
    "checking",
    "no_answer",
    "publish_bound",
]

T = TypeVar("T")
Connection = psycopg.AsyncConnection[Any]

ROW_ALLOWANCE_SECS = 0.001
"""What a batch adds to a publish's bound per row (seconds): 10,000 rows get 10 s more, the
time a loaded server may take to write them."""

_REAP_SECS = 1.0
"""How long the statement's task may take to fail once its socket is shut down."""


def publish_bound(publish_timeout: float | None, rows: int) -> float | None:
    """The seconds a publish of ``rows`` rows waits for the database (``None``: no bound)."""
    if publish_timeout is None:
        return None
    return publish_timeout + ROW_ALLOWANCE_SECS * max(rows - 1, 0)


class NoAnswerError(DatabaseUnavailableError):
    """The database did not answer a publish within its bound: the rows may or may not have
    been written. The pool is not checked after it (a check would wait on the same silence)."""


def no_answer(server: str, bound: float) -> NoAnswerError:
    """The error of a publish the database did not answer within ``bound`` seconds."""
    return NoAnswerError(
        f"PostgreSQL at {server} did not answer within {bound:g}s (publish_timeout): the job "
        "may or may not have been written; the connection was dropped. Retrying is "
        "at-least-once (a unique key or an idempotency key makes the retry safe)"
    )


def _sever(conn: Connection) -> None:
    """Shut ``conn``'s socket down in both directions: a read waiting on it ends at once."""
    with contextlib.suppress(Exception):
        fd = conn.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)


_TOUCHED: ContextVar[list[Connection] | None] = ContextVar("queuey_publish_touched", default=None)


def checking(conn: Connection) -> None:
    """Note that a bounded publish is about to check ``conn`` (the pool's idle check): the
    bound shuts it down too when the check does not answer."""
    touched = _TOUCHED.get()
    if touched is not None:
        touched.append(conn)


async def answered(
    loan: AbstractAsyncContextManager[Connection],
    work: Callable[[Connection], Awaitable[T]],
    bound: float | None,
    error: Callable[[float], DatabaseUnavailableError],
) -> T:
    """``work`` on the connection of ``loan``, all of it (the loan, an idle check, the
    statement) within ``bound`` seconds (``None``: no bound).

    Raises:
        DatabaseUnavailableError: ``error(bound)`` when the bound passed first; the
            connection (when one was lent) is shut down and closed.
    """
    if bound is None:
        async with loan as conn:
            return await work(conn)
    lent: list[Connection] = []  # every connection the publish checked or ran on

    async def run() -> T:
        _TOUCHED.set(lent)
        async with _noting(loan, lent) as conn:
            return await work(conn)

    task = asyncio.ensure_future(run())
    try:
        done, _ = await asyncio.wait({task}, timeout=bound)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task in done:
        return task.result()
    if not lent:  # nothing sent yet: the checkout's own timeout says why (nothing written)
        done, _ = await asyncio.wait({task}, timeout=_REAP_SECS)
        if task in done:
            return task.result()
    for conn in lent:
        _sever(conn)
    done, _ = await asyncio.wait({task}, timeout=_REAP_SECS)
    if task in done and not task.cancelled() and task.exception() is None:
        return task.result()  # answered as the bound passed
    if task not in done:
        task.cancel()
    else:
        task.exception()  # retrieved: the error raised below says what happened
    for conn in lent:
        with contextlib.suppress(Exception):
            await conn.close()
    raise error(bound)


@asynccontextmanager
async def _noting(
    loan: AbstractAsyncContextManager[Connection], lent: list[Connection]
) -> AsyncIterator[Connection]:
    async with loan as conn:
        if not lent or lent[-1] is not conn:
            lent.append(conn)
        yield conn
