"""Failures that are retried in the background, logged once per outage.

Consumers and maintenance run their statements again on their own (the next claim, the next
sweep), so a database that is down for a minute must not write a warning per attempt: the
first failure of an outage is logged at WARNING, its end at INFO, nothing between.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from queuey.errors import BackendError
from queuey.secrets import redact

__all__ = ["Outage"]

T = TypeVar("T")
log = logging.getLogger("queuey.postgres")


class Outage:
    """The state of one thing that fails and recovers (the database, the LISTEN connection).

    Args:
        what: how log lines name it.
        on_recovered: called when an outage ends (the backend wakes its consumers: rows
            published meanwhile must not wait for the poll).
    """

    def __init__(self, what: str, on_recovered: Callable[[], None] | None = None) -> None:
        self.what = what
        self.down = False
        self._on_recovered = on_recovered

    def failed(self, exc: BaseException) -> None:
        """Record a failure; only the first of an outage is logged."""
        if not self.down:
            self.down = True
            log.warning(
                "%s failed: %s (retrying quietly until it is back)",
                self.what,
                redact(str(exc).strip() or type(exc).__name__),
            )

    def recovered(self) -> None:
        """Record a success; logs once (and calls ``on_recovered``) if an outage just ended."""
        if self.down:
            self.down = False
            log.info("%s is back", self.what)
            if self._on_recovered is not None:
                self._on_recovered()

    async def attempt(self, statement: Awaitable[T]) -> T | None:
        """Await ``statement``; ``None`` when it failed with a ``BackendError`` (recorded here,
        so the caller simply tries again later)."""
        try:
            result = await statement
        except BackendError as exc:
            self.failed(exc)
            return None
        self.recovered()
        return result
