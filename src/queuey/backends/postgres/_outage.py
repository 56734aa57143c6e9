"""Failures that are retried in the background, logged once per outage.

Consumers and maintenance run their statements again on their own (the next claim, the next
sweep), so a database that is down for a minute must not write a warning per attempt: the
first failure of an outage is logged at WARNING, its end at INFO, nothing between (the
failures in between are logged at DEBUG).

One database outage breaks several things at once: the pool's connections and the LISTEN
session. Each is a part of one ``Outage`` (``part``): the outage starts when the first part
fails and ends when every part that failed works again, so a restart is one line at each end.
psycopg's pool would add a WARNING per reconnection attempt of its own; ``quiet_pool_logs``
turns those into DEBUG records for queuey's pools.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

from queuey.backends._quiet import demote
from queuey.errors import BackendError
from queuey.secrets import redact

__all__ = ["POOLED", "POOL_NAME_PREFIX", "Outage", "quiet_pool_logs"]

T = TypeVar("T")
log = logging.getLogger("queuey.postgres")

POOL_NAME_PREFIX = "queuey"
"""How the names of queuey's connection pools start (``quiet_pool_logs`` picks their records)."""

_POOL_NOISE = (
    "error connecting in %r",  # one per failed reconnection attempt
    "reconnection attempt in pool %r failed",  # a connection given up after reconnect_timeout
    "discarding broken connection",  # one per pooled connection a restart killed
    "discarding closed connection",
)


POOLED: weakref.WeakSet[object] = weakref.WeakSet()
"""The connections queuey's pools opened (``_pool`` adds each one as it is configured)."""


def _of_queuey_pool(record: logging.LogRecord) -> bool:
    """Whether ``record`` is one of psycopg's per-attempt records about a queuey pool (its
    first argument is the pool's name, or one of its connections)."""
    if not isinstance(record.msg, str) or not record.msg.startswith(_POOL_NOISE):
        return False
    args = record.args if isinstance(record.args, tuple) else ()
    first = args[0] if args else None
    if isinstance(first, str):
        return first.startswith(POOL_NAME_PREFIX)
    try:
        return first in POOLED
    except TypeError:  # not weakly referenceable: not ours
        return False


def quiet_pool_logs() -> None:
    """Make psycopg's per-attempt reconnection warnings about queuey's pools DEBUG records
    (shown only when ``psycopg.pool`` logs at DEBUG). Other pools' records are left alone.
    Idempotent."""
    demote("psycopg.pool", _of_queuey_pool, "queuey.postgres")


class Outage:
    """The state of one thing that fails and recovers (the database), made of parts (its
    pool, its LISTEN connection) that fail and recover together or apart.

    Args:
        what: how log lines name it.
        on_recovered: called when an outage ends (the backend wakes its consumers: rows
            published meanwhile must not wait for the poll).
    """

    def __init__(self, what: str, on_recovered: Callable[[], None] | None = None) -> None:
        self.what = what
        self._on_recovered = on_recovered
        self._failing: set[str] = set()  # shared by every part
        self._part = ""

    @property
    def down(self) -> bool:
        """Whether an outage is going on (some part failed and is not back)."""
        return bool(self._failing)

    def part(self, name: str) -> Outage:
        """A handle on this outage for one more thing that breaks with it (named ``name`` in
        the log line when it is the first to fail)."""
        other = copy.copy(self)
        other._part = name
        return other

    def failed(self, exc: BaseException) -> None:
        """Record a failure; only the first of an outage is logged (at WARNING)."""
        reason = " ".join(redact(str(exc)).split()) or type(exc).__name__
        if self._failing:
            self._failing.add(self._part)
            log.debug("%s still failing: %s", self._name(), reason)
            return
        self._failing.add(self._part)
        log.warning("%s failed: %s (retrying quietly until it is back)", self._name(), reason)

    def recovered(self) -> None:
        """Record a success; logs once (and calls ``on_recovered``) when the last failing part
        of an outage is back."""
        if self._part not in self._failing:
            return
        self._failing.discard(self._part)
        if self._failing:
            log.debug("%s is back", self._name())
            return
        log.info("%s is back", self.what)
        if self._on_recovered is not None:
            self._on_recovered()

    def _name(self) -> str:
        return f"{self.what} ({self._part})" if self._part else self.what

    async def attempt(self, statement: Awaitable[T]) -> T | None:
        """Await ``statement``; ``None`` when it failed with a ``BackendError`` (recorded here,
        so the caller simply tries again later)."""
        try:
            result = await statement
        except BackendError as exc:
            if _cancelling():
                # psycopg may turn the task's cancellation into a database error (the query
                # cancelled on the server): the cancellation wins, or the loop never stops.
                raise asyncio.CancelledError from None
            self.failed(exc)
            return None
        self.recovered()
        return result


def _cancelling() -> bool:
    """Whether the running task has a cancellation pending (``Task.cancelling``)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
