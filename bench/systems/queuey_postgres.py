"""queuey on PostgreSQL, in its own schema (``bench_queuey``) and NOTIFY channel, with the
library's defaults except the queue's ``prefetch`` (rows claimed and held per consumer; 256, the
counterpart of PgQueuer's ``batch_size``)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from bench.systems._env import DATABASE_URL, SUFFIX, drop_schema
from bench.systems._queuey import PREFETCH, BenchQueues, QueueyBench
from queuey.backends.base import Backend
from queuey.backends.postgres import PostgresBackend, migrate

__all__ = ["BenchQueues", "make"]

SCHEMA = f"bench_queuey{SUFFIX}"
CHANNEL = f"bench_queuey{SUFFIX}"


class QueueyPostgres(QueueyBench):
    """The ``Bench`` of queuey on PostgreSQL."""

    def __init__(self) -> None:
        self.settings: dict[str, Any] = {
            "driver": "psycopg 3 (pool)",
            "prefetch": PREFETCH,
            "concurrency": "default (= prefetch)",
            "notify": True,
            "handler": "async def, no-op",
        }

    def open_backend(self) -> AbstractAsyncContextManager[Backend]:
        return PostgresBackend(DATABASE_URL, schema=SCHEMA, channel=CHANNEL, retain=None)

    async def purge(self, backend: Backend) -> None:
        assert isinstance(backend, PostgresBackend)
        await backend.purge([BenchQueues.noop.name])

    async def setup(self) -> None:
        await drop_schema(SCHEMA)
        await migrate(DATABASE_URL, schema=SCHEMA)

    async def teardown(self) -> None:
        await drop_schema(SCHEMA)


def make() -> QueueyPostgres:
    """The system's ``Bench``."""
    return QueueyPostgres()
