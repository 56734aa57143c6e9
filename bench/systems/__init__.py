"""One module per benchmarked system, each exposing ``make() -> Bench``.

A system's module is imported only in the child process that measures it, so a peer that is not
installed (or a backend not merged yet) costs only that system's rows.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["MODULES", "Bench", "Tally", "load"]

MODULES = {
    "queuey-postgres": "bench.systems.queuey_postgres",
    "queuey-rabbitmq": "bench.systems.queuey_rabbitmq",
    "pgqueuer": "bench.systems.pgqueuer_postgres",
    "procrastinate": "bench.systems.procrastinate_postgres",
    "dramatiq": "bench.systems.dramatiq_rabbitmq",
    "aio-pika": "bench.systems.aio_pika_rabbitmq",
    "sql-limit": "bench.systems.sql_limit",
    "bare-loop": "bench.systems.bare_loop",
}


class Tally:
    """Counts handler starts (from any thread) and records enqueue → start latencies.

    ``hit(t)`` is called by a handler as it starts, with ``t`` the ``time.time()`` (seconds)
    taken by the producer just before it enqueued that job. ``done`` is set once ``expected``
    starts were seen. Latencies are kept only when ``record`` (a drain keeps none, so that the
    worker's peak RSS is the worker's, not the harness's). A system without a worker (the SQL
    limit) sets ``elapsed_s`` itself.
    """

    def __init__(self, expected: int, loop: asyncio.AbstractEventLoop, record: bool = True) -> None:
        self.expected = expected
        self.elapsed_s: float | None = None
        self.latencies_ms: list[float] = []
        self.count = 0
        self._record = record
        self.done = asyncio.Event()
        self._loop = loop
        self._lock = threading.Lock()

    def hit(self, enqueued_at: float) -> None:
        """Record one handler start (thread-safe)."""
        now = time.time()
        with self._lock:
            if self._record:
                self.latencies_ms.append((now - enqueued_at) * 1000.0)
            self.count += 1
            finished = self.count == self.expected
        if finished:
            self._loop.call_soon_threadsafe(self.done.set)


class Bench(Protocol):
    """What each system implements, all inside one child process.

    Attributes:
        settings: the configuration measured, as reported in the JSON and the doc.
    """

    settings: dict[str, Any]

    async def setup(self) -> None:
        """Create this system's own schema or queue, dropping any left from an earlier run."""
        ...

    async def teardown(self) -> None:
        """Drop this system's schema or queue."""
        ...

    async def clear(self) -> None:
        """Empty the queue between repetitions."""
        ...

    async def enqueue(self, payloads: int, bulk: bool, interval_s: float) -> float:
        """Enqueue ``payloads`` no-op jobs: all in one bulk call when ``bulk``, else one at a
        time, each awaited, starting one every ``interval_s`` seconds (0 = back to back).
        Each job's payload carries ``time.time()`` taken just before its enqueue.

        Returns:
            The seconds spent building and enqueuing the jobs, once connected (connection
            set-up is not timed, for any system).
        """
        ...

    async def work(self, tally: Tally, ready: Callable[[], None]) -> None:
        """Run one worker until ``tally.done``, then stop it gracefully (settles recorded).

        Calls ``ready()`` once the worker is connected, just before it starts consuming.
        """
        ...


def load(system: str) -> Bench:
    """The ``Bench`` of ``system``.

    Raises:
        ImportError: the system's library is not installed (or not merged yet).
        KeyError: an unknown system name.
    """
    module = importlib.import_module(MODULES[system])
    maker: Callable[[], Bench] = module.make
    return maker()
