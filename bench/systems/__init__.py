"""One module per benchmarked system, each exposing ``make() -> Bench``.

A system's module is imported only in the child process that measures it, so a peer that is not
installed (or a backend not merged yet) costs only that system's rows.
"""

from __future__ import annotations

import asyncio
import importlib
import mmap
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["MODULES", "Bench", "Scaled", "SharedCount", "Tally", "Timed", "load"]

MODULES = {
    "queuey-postgres": "bench.systems.queuey_postgres",
    "queuey-postgres-batch": "bench.systems.queuey_postgres_batch",
    "queuey-rabbitmq": "bench.systems.queuey_rabbitmq",
    "pgqueuer": "bench.systems.pgqueuer_postgres",
    "procrastinate": "bench.systems.procrastinate_postgres",
    "dramatiq": "bench.systems.dramatiq_rabbitmq",
    "aio-pika": "bench.systems.aio_pika_rabbitmq",
    "sql-limit": "bench.systems.sql_limit",
    "bare-loop": "bench.systems.bare_loop",
}


class SharedCount:
    """Handler starts summed over the worker processes of one drain: a file holding one
    8-byte counter per process, mapped into each; each process writes only its own.

    Args:
        path: the file, ``8 * processes`` zero bytes long (made by the harness).
        index: this process's counter, 0-based.
        processes: how many counters the file holds.
    """

    def __init__(self, path: str, index: int, processes: int) -> None:
        with open(path, "r+b") as file:
            self._map = mmap.mmap(file.fileno(), 8 * processes)
        self._offset = 8 * index
        self._format = f"{processes}q"

    def publish(self, count: int) -> int:
        """Store this process's ``count``; returns the sum over every process."""
        struct.pack_into("q", self._map, self._offset, count)
        return self.total()

    def total(self) -> int:
        """The sum over every process."""
        return sum(struct.unpack_from(self._format, self._map))


class Tally:
    """Counts handler starts (from any thread) and records enqueue → start latencies.

    ``hit(t)`` is called by a handler as it starts, with ``t`` the ``time.time()`` (seconds)
    taken by the producer just before it enqueued that job. ``done`` is set once ``expected``
    starts were seen (with ``shared``, over every worker process of the drain: the process
    that does not run the last job learns it from ``watch``). Latencies are kept only when
    ``record`` (a drain keeps none, so that the worker's peak RSS is the worker's, not the
    harness's). ``marked_at`` is the ``time.monotonic()`` at which ``mark`` starts were seen.
    A system without a worker (the SQL limit) sets ``elapsed_s`` itself.
    """

    def __init__(
        self,
        expected: int,
        loop: asyncio.AbstractEventLoop,
        record: bool = True,
        shared: SharedCount | None = None,
        mark: int = 0,
    ) -> None:
        self.expected = expected
        self.elapsed_s: float | None = None
        self.latencies_ms: list[float] = []
        self.count = 0
        self.marked_at: float | None = None
        self._record = record
        self._shared = shared
        self._mark = mark
        self._finished = False
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
            total = self.count if self._shared is None else self._shared.publish(self.count)
            if total == self._mark:
                self.marked_at = time.monotonic()
            finished = total >= self.expected and not self._finished
            self._finished = self._finished or finished
        if finished:
            self._loop.call_soon_threadsafe(self.done.set)

    async def watch(self, every_s: float = 0.002) -> None:
        """Set ``done`` once the shared count is reached (a no-op without ``shared``)."""
        if self._shared is None:
            return
        while not self.done.is_set():
            if self._shared.total() >= self.expected:
                self.done.set()
                return
            await asyncio.sleep(every_s)


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


class Timed(Protocol):
    """A system whose producer can time each enqueue call (``enqueue_p99_during_drain``)."""

    async def enqueue_timed(
        self, payloads: int, interval_s: float, ready: Callable[[], None]
    ) -> list[tuple[float, float]]:
        """Enqueue ``payloads`` no-op jobs one at a time, one every ``interval_s`` seconds,
        after one untimed warm-up enqueue and a call of ``ready()`` (which may block until
        the harness says go).

        Returns:
            ``(time.monotonic() at the call's start, its duration in ms)`` per call.
        """
        ...


class Scaled(Protocol):
    """A PostgreSQL system that can fill its own table with history (``drain_scaled``)."""

    async def fill(self, done: int, later: int) -> None:
        """Empty the queue, then add ``done`` rows of jobs already run and ``later`` jobs
        scheduled an hour ahead, in the shape the system stores them (one ``INSERT … SELECT
        generate_series`` per kind), then ``VACUUM ANALYZE`` the tables."""
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
