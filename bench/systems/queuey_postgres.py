"""queuey on PostgreSQL, in its own schema (``bench_queuey``) and NOTIFY channel, with the
library's defaults except the queue's ``prefetch`` (rows claimed and held per consumer; 256, the
counterpart of PgQueuer's ``batch_size``)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg
from psycopg import sql

from bench.systems._env import DATABASE_URL, SUFFIX, drop_schema
from bench.systems._queuey import PREFETCH, BenchQueues, QueueyBench
from queuey.backends.base import Backend
from queuey.backends.postgres import PostgresBackend, migrate

__all__ = ["BenchQueues", "make"]

SCHEMA = f"bench_queuey{SUFFIX}"
_DONE = sql.SQL(
    "INSERT INTO {} (id, kind, queue, job_type, status, attempts, payload, enqueued_at_ms,"
    " available_at, claimed_at, processed_at, created_at)"
    " SELECT gen_random_uuid(), 'job', %(queue)s, 'bench.Noop', 'done', 1, '{{\"t\": 0}}',"
    " at_ms, at, at, at + interval '1 ms', at"
    " FROM (SELECT now() - interval '1 day' + g * interval '50 ms' AS at,"
    " (extract(epoch FROM now() - interval '1 day') * 1000)::bigint + g * 50 AS at_ms"
    " FROM generate_series(1, %(rows)s) AS g) AS s"
)
"""Jobs run over the last day, as ``ack`` leaves them (``done``, lease and owner cleared)."""
_LATER = sql.SQL(
    "INSERT INTO {} (id, kind, queue, job_type, payload, enqueued_at_ms, available_at)"
    " SELECT gen_random_uuid(), 'job', %(queue)s, 'bench.Noop', '{{\"t\": 0}}',"
    " (extract(epoch FROM now()) * 1000)::bigint, now() + interval '1 hour'"
    " FROM generate_series(1, %(rows)s)"
)
"""Jobs enqueued with a delay of an hour (``pending``, ``available_at`` ahead)."""


class QueueyPostgres(QueueyBench):
    """The ``Bench`` of queuey on PostgreSQL, in ``schema`` (and a NOTIFY channel of that
    name)."""

    def __init__(self, schema: str = SCHEMA) -> None:
        self.schema = schema
        self.settings: dict[str, Any] = {
            "driver": "psycopg 3 (pool)",
            "prefetch": PREFETCH,
            "concurrency": "default (= prefetch)",
            "notify": True,
            "handler": "async def, no-op",
            "gc": "start-up heap frozen (gc.freeze), as queuey worker does",
        }

    def open_backend(self) -> AbstractAsyncContextManager[Backend]:
        return PostgresBackend(DATABASE_URL, schema=self.schema, channel=self.schema, retain=None)

    async def purge(self, backend: Backend) -> None:
        assert isinstance(backend, PostgresBackend)
        await backend.purge([BenchQueues.noop.name])

    async def setup(self) -> None:
        await drop_schema(self.schema)
        await migrate(DATABASE_URL, schema=self.schema)

    async def teardown(self) -> None:
        await drop_schema(self.schema)

    async def fill(self, done: int, later: int) -> None:
        table = sql.Identifier(self.schema, "queue_message")
        async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
            await conn.execute(sql.SQL("TRUNCATE {}").format(table))
            queue = BenchQueues.noop.name
            for statement, rows in ((_DONE, done), (_LATER, later)):
                if rows:
                    await conn.execute(statement.format(table), {"queue": queue, "rows": rows})
            await conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))


def make() -> QueueyPostgres:
    """The system's ``Bench``."""
    return QueueyPostgres()
