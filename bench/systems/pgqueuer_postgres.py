"""PgQueuer on PostgreSQL through asyncpg (its fastest driver), in its own schema
(``bench_pgqueuer``) with its own object prefix and NOTIFY channel.

Throughput settings from its documentation: ``batch_size`` (jobs fetched per dequeue, the
benchmark's best, 250), no per-entrypoint concurrency limit, the default ``durable`` tables
(the same durability as queuey's), one asyncpg connection as in its own benchmark tool.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

os.environ["PGQUEUER_SCHEMA"] = f"bench_pgqueuer{os.environ.get('BENCH_SUFFIX', '')}"
os.environ["PGQUEUER_PREFIX"] = f"bench{os.environ.get('BENCH_SUFFIX', '')}_"  # = PREFIX

import asyncpg
from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
from pgqueuer.adapters.persistence.queries import Queries
from pgqueuer.core.qm import QueueManager
from pgqueuer.domain.models import Job

from bench.systems import Tally
from bench.systems._env import DATABASE_URL, SUFFIX, drop_schema, payload_time

__all__ = ["make"]

SCHEMA = f"bench_pgqueuer{SUFFIX}"
PREFIX = f"bench{SUFFIX}_"
_QUEUE = f'"{SCHEMA}"."{PREFIX}pgqueuer"'
_LOG = f'"{SCHEMA}"."{PREFIX}pgqueuer_log"'
_DONE = (
    f"INSERT INTO {_LOG} (created, job_id, status, priority, entrypoint)"
    " SELECT now() - interval '1 day' + g * interval '50 ms', g,"
    f' s::"{SCHEMA}"."{PREFIX}pgqueuer_status", 0, \'noop\''
    " FROM generate_series(1, $1::bigint) AS g,"
    " unnest(ARRAY['queued', 'picked', 'successful']) AS s"
)
"""Jobs run over the last day: PgQueuer deletes a finished job from its queue table and keeps
three rows per job in its log table (``queued``, ``picked``, ``successful``), as a drain
leaves them."""
_LATER = (
    f"INSERT INTO {_QUEUE} (priority, status, entrypoint, payload, execute_after)"
    " SELECT 0, 'queued', 'noop', convert_to('{\"t\": 0}', 'UTF8'), now() + interval '1 hour'"
    " FROM generate_series(1, $1::bigint)"
)
"""Jobs enqueued with ``execute_after`` an hour ahead."""
BATCH_SIZE = int(os.environ.get("BENCH_PGQUEUER_BATCH", "250"))


class PgQueuerPostgres:
    """The ``Bench`` of PgQueuer."""

    def __init__(self) -> None:
        import pgqueuer

        self.settings: dict[str, Any] = {
            "version": getattr(pgqueuer, "__version__", "?"),
            "driver": "asyncpg (one connection)",
            "batch_size": BATCH_SIZE,
            "durability": "durable",
            "max_concurrent_tasks": None,
            "handler": "async def, no-op",
        }

    async def _queries(self) -> tuple[asyncpg.Connection, Queries]:
        conn = await asyncpg.connect(DATABASE_URL)
        return conn, Queries(AsyncpgDriver(conn))

    async def setup(self) -> None:
        await drop_schema(SCHEMA)
        conn, queries = await self._queries()
        try:
            await queries.install()
        finally:
            await conn.close()

    async def teardown(self) -> None:
        await drop_schema(SCHEMA)

    async def clear(self) -> None:
        conn, queries = await self._queries()
        try:
            await queries.clear_queue()
            await queries.clear_queue_log()
        finally:
            await conn.close()

    async def fill(self, done: int, later: int) -> None:
        conn = await asyncpg.connect(DATABASE_URL)
        try:
            await conn.execute(f"TRUNCATE {_QUEUE}, {_LOG}")
            for statement, rows in ((_DONE, done), (_LATER, later)):
                if rows:
                    await conn.execute(statement, rows)
            await conn.execute(f"VACUUM ANALYZE {_QUEUE}")
            await conn.execute(f"VACUUM ANALYZE {_LOG}")
        finally:
            await conn.close()

    async def enqueue_timed(
        self, payloads: int, interval_s: float, ready: Callable[[], None]
    ) -> list[tuple[float, float]]:
        conn, queries = await self._queries()
        try:
            await queries.enqueue("noop", f'{{"t": {time.time()}}}'.encode())  # warm-up
            ready()
            calls: list[tuple[float, float]] = []
            loop = asyncio.get_running_loop()
            start = loop.time()
            for i in range(payloads):
                await asyncio.sleep(max(0.0, start + i * interval_s - loop.time()))
                began = time.monotonic()
                await queries.enqueue("noop", f'{{"t": {time.time()}}}'.encode())
                calls.append((began, (time.monotonic() - began) * 1000.0))
            return calls
        finally:
            await conn.close()

    async def enqueue(self, payloads: int, bulk: bool, interval_s: float) -> float:
        conn, queries = await self._queries()
        try:
            started = time.perf_counter()
            if bulk:
                bodies = [f'{{"t": {time.time()}}}'.encode() for _ in range(payloads)]
                await queries.enqueue(["noop"] * payloads, list(bodies), [0] * payloads)
                return time.perf_counter() - started
            loop = asyncio.get_running_loop()
            start = loop.time()
            for i in range(payloads):
                if interval_s:
                    await asyncio.sleep(max(0.0, start + i * interval_s - loop.time()))
                await queries.enqueue("noop", f'{{"t": {time.time()}}}'.encode())
            return time.perf_counter() - started
        finally:
            await conn.close()

    async def work(self, tally: Tally, ready: Callable[[], None]) -> None:
        conn, queries = await self._queries()
        try:
            manager = QueueManager(queries)

            @manager.entrypoint("noop")
            async def noop(job: Job) -> None:
                tally.hit(payload_time(job.payload))

            ready()
            running = asyncio.create_task(manager.run(batch_size=BATCH_SIZE))
            await tally.done.wait()
            manager.shutdown.set()
            await running
        finally:
            await conn.close()


def make() -> PgQueuerPostgres:
    """The system's ``Bench``."""
    return PgQueuerPostgres()
