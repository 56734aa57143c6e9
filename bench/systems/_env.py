"""Where the benchmark's servers are, and the small database chores every PostgreSQL system
shares (dropping its own schema, counting rows).

``BENCH_DATABASE_URL`` and ``BENCH_AMQP_URL`` override the local defaults. ``BENCH_SUFFIX``
(empty by default) is appended to every system's schema, queue and NOTIFY channel names, so
that two runs on one server keep apart.
"""

from __future__ import annotations

import os

import psycopg
from psycopg import sql

__all__ = ["AMQP_URL", "DATABASE_URL", "SUFFIX", "drop_schema", "payload_time"]

DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
AMQP_URL = os.environ.get("BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
SUFFIX = os.environ.get("BENCH_SUFFIX", "")


async def drop_schema(schema: str, create: bool = False) -> None:
    """Drop ``schema`` (and everything in it); with ``create``, make it again, empty."""
    async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )
        if create:
            await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))


def payload_time(payload: bytes | None) -> float:
    """The enqueue ``time.time()`` carried by a raw JSON payload ``{"t": seconds}``."""
    import json

    return float(json.loads(payload or b"{}")["t"])
