"""The runs a backend's ``close`` waits for: runs of this process that could not be stopped
(a plain handler's thread, which nothing can interrupt) and whose jobs the backend still holds.

Closing the backend under such a run would end what keeps its job held (PostgreSQL's heartbeat,
a RabbitMQ channel) while the run goes on: its lease would expire and another worker would
start the job while it still executes here, and the run's own outcome would be lost. So the
worker hands those runs to its backend (``RunKeeper.keep_open_for``) when it shuts down, and
``close`` waits for them first, with everything still running (a WARNING says how many, and
again every minute while they last). A process that exits ends them with it (their threads
are daemon threads) and the backend's lease hands their jobs over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

__all__ = ["OpenRuns"]

log = logging.getLogger("queuey.backends")

REMIND_EVERY = 60.0
"""Seconds between the WARNINGs of a close still waiting for runs."""


class OpenRuns:
    """The runs one backend's ``close`` waits for.

    Args:
        name: names the backend in the log (``"PostgresBackend"``).
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._runs: set[asyncio.Future[Any]] = set()

    def keep(self, runs: Iterable[asyncio.Future[Any]]) -> None:
        """Make ``close`` wait for ``runs`` (each forgotten once done)."""
        for run in runs:
            if not run.done():
                self._runs.add(run)
                run.add_done_callback(self._runs.discard)

    async def wait(self) -> None:
        """Return once every kept run has ended, logging at WARNING while some run."""
        while running := {run for run in self._runs if not run.done()}:
            log.warning(
                "closing %s waits for %d run(s) that still execute in this process (plain "
                "handlers' threads cannot be stopped); their jobs stay held until they end",
                self._name,
                len(running),
            )
            await asyncio.wait(running, timeout=REMIND_EVERY)
        self._runs.clear()
