"""procrastinate on PostgreSQL (psycopg 3 pool), in its own schema (``bench_procrastinate``,
through the connections' ``search_path``).

Throughput settings from its documentation: ``concurrency`` (jobs run at once by one worker; 10
here, as in its own benchmarks), LISTEN/NOTIFY on, ``delete_jobs="never"`` (the default: rows
stay, as queuey's done rows stay until retention prunes them).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

import procrastinate

from bench.systems import Tally
from bench.systems._env import DATABASE_URL, SUFFIX, drop_schema

__all__ = ["make"]

SCHEMA = f"bench_procrastinate{SUFFIX}"
CONCURRENCY = int(os.environ.get("BENCH_PROCRASTINATE_CONCURRENCY", "10"))
_URL = f"{DATABASE_URL}{'&' if '?' in DATABASE_URL else '?'}options=-csearch_path%3D{SCHEMA}"


class ProcrastinatePostgres:
    """The ``Bench`` of procrastinate."""

    def __init__(self) -> None:
        self.settings: dict[str, Any] = {
            "version": procrastinate.__version__,
            "driver": "psycopg 3 (PsycopgConnector pool)",
            "concurrency": CONCURRENCY,
            "listen_notify": True,
            "delete_jobs": "never",
            "handler": "async def, no-op",
        }
        self.tally: Tally | None = None
        self.app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=_URL))

        @self.app.task(name="noop")
        async def noop(t: float) -> None:
            if self.tally is not None:
                self.tally.hit(t)

        self.noop = noop

    async def setup(self) -> None:
        await drop_schema(SCHEMA, create=True)
        async with self.app.open_async():
            await self.app.schema_manager.apply_schema_async()

    async def teardown(self) -> None:
        await drop_schema(SCHEMA)

    async def clear(self) -> None:
        async with self.app.open_async():
            await self.app.connector.execute_query_async("TRUNCATE procrastinate_jobs CASCADE")

    async def enqueue(self, payloads: int, bulk: bool, interval_s: float) -> float:
        async with self.app.open_async():
            started = time.perf_counter()
            if bulk:
                batch: list[dict[str, Any]] = [{"t": time.time()} for _ in range(payloads)]
                await self.noop.batch_defer_async(*batch)
                return time.perf_counter() - started
            loop = asyncio.get_running_loop()
            start = loop.time()
            for i in range(payloads):
                if interval_s:
                    await asyncio.sleep(max(0.0, start + i * interval_s - loop.time()))
                await self.noop.defer_async(t=time.time())
            return time.perf_counter() - started

    async def work(self, tally: Tally, ready: Callable[[], None]) -> None:
        self.tally = tally
        async with self.app.open_async():
            ready()
            running = asyncio.create_task(
                self.app.run_worker_async(
                    concurrency=CONCURRENCY, install_signal_handlers=False, listen_notify=True
                )
            )
            await tally.done.wait()
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running


def make() -> ProcrastinatePostgres:
    """The system's ``Bench``."""
    return ProcrastinatePostgres()
