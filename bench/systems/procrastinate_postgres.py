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
import psycopg

from bench.systems import Tally
from bench.systems._env import DATABASE_URL, SUFFIX, drop_schema

__all__ = ["make"]

SCHEMA = f"bench_procrastinate{SUFFIX}"
CONCURRENCY = int(os.environ.get("BENCH_PROCRASTINATE_CONCURRENCY", "10"))
_DONE = (
    "WITH j AS (INSERT INTO procrastinate_jobs (queue_name, task_name, args, status, attempts)"
    " SELECT 'default', 'noop', '{\"t\": 0}', 'succeeded', 1"
    " FROM generate_series(1, %(rows)s) RETURNING id)"
    " INSERT INTO procrastinate_events (job_id, type, at)"
    " SELECT j.id, e.type::procrastinate_job_event_type, now() - interval '1 day'"
    " FROM j, unnest(ARRAY['deferred', 'started', 'succeeded']) AS e(type)"
)
"""Jobs already run, as a drain leaves them (``delete_jobs="never"``): ``succeeded`` rows with
their three events (the triggers record them only for rows inserted as ``todo``)."""
_LATER = (
    "INSERT INTO procrastinate_jobs (queue_name, task_name, args, scheduled_at)"
    " SELECT 'default', 'noop', '{\"t\": 0}', now() + interval '1 hour'"
    " FROM generate_series(1, %(rows)s)"
)
"""Jobs deferred an hour ahead (``todo`` with ``scheduled_at``; the triggers add their
``deferred`` and ``scheduled`` events)."""
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

    async def fill(self, done: int, later: int) -> None:
        async with await psycopg.AsyncConnection.connect(_URL, autocommit=True) as conn:
            await conn.execute("TRUNCATE procrastinate_jobs CASCADE")
            for statement, rows in ((_DONE, done), (_LATER, later)):
                if rows:
                    await conn.execute(statement, {"rows": rows})
            await conn.execute("VACUUM ANALYZE procrastinate_jobs, procrastinate_events")

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
