"""The bare loop: what one Python process drains with psycopg 3 and no framework, in its own
schema (``bench_bare``, queuey's table): claim 250 due rows with ``FOR UPDATE SKIP LOCKED``,
``json.loads`` each payload, delete the batch, until the queue is empty. Enqueueing is one
``INSERT`` per job, or one ``COPY`` in bulk (no NOTIFY: nothing listens). The drain's ratio
to it says how much the framework costs per job."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from bench.systems import Tally
from bench.systems._env import DATABASE_URL, SUFFIX, drop_schema
from queuey.backends.postgres import migrate
from queuey.envelope import new_job_ids

__all__ = ["make"]

SCHEMA = f"bench_bare{SUFFIX}"
BATCH = 250
QUEUE = "bench.noop"
_TABLE = sql.Identifier(SCHEMA, "queue_message")
_CLAIM = sql.SQL(
    "SELECT id, payload::text FROM {} WHERE status = 'pending' AND kind = 'job' AND queue = %s"
    " ORDER BY priority DESC, available_at, seq LIMIT %s FOR UPDATE SKIP LOCKED"
).format(_TABLE)
_DELETE = sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(_TABLE)
_INSERT = sql.SQL(
    "INSERT INTO {} (id, kind, queue, job_type, payload) VALUES (%s, 'job', 'bench.noop',"
    " 'bench.Noop', %s::json)"
).format(_TABLE)
_COPY = sql.SQL("COPY {} (id, kind, queue, job_type, payload) FROM STDIN").format(_TABLE)


class BareLoop:
    """The ``Bench`` of the bare loop."""

    def __init__(self) -> None:
        self.settings: dict[str, Any] = {
            "driver": "psycopg 3, one connection",
            "batch": BATCH,
            "loop": "claim (SKIP LOCKED) + json.loads per row + DELETE of the batch, one "
            "transaction per batch",
        }

    async def setup(self) -> None:
        await drop_schema(SCHEMA)
        await migrate(DATABASE_URL, schema=SCHEMA)

    async def teardown(self) -> None:
        await drop_schema(SCHEMA)

    async def clear(self) -> None:
        async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
            await conn.execute(sql.SQL("TRUNCATE {}").format(_TABLE))

    async def enqueue(self, payloads: int, bulk: bool, interval_s: float) -> float:
        async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
            started = time.perf_counter()
            if not bulk:  # one INSERT per job, each awaited
                for job_id in new_job_ids(payloads):
                    await conn.execute(_INSERT, (job_id, json.dumps({"t": time.time()})))
                return time.perf_counter() - started
            ids = new_job_ids(payloads)
            data = "".join(
                f'{job_id}\tjob\t{QUEUE}\tbench.Noop\t{{"t": {time.time()}}}\n' for job_id in ids
            )
            async with conn.cursor().copy(_COPY) as copy:
                await copy.write(data)
            return time.perf_counter() - started

    async def work(self, tally: Tally, ready: Callable[[], None]) -> None:
        loads = json.loads
        async with await psycopg.AsyncConnection.connect(DATABASE_URL) as conn:
            ready()
            started = time.perf_counter()
            done = 0
            while done < tally.expected:
                cursor = await conn.execute(_CLAIM, (QUEUE, BATCH))
                rows = await cursor.fetchall()
                if not rows:
                    await conn.rollback()
                    continue
                for _, payload in rows:
                    loads(payload)
                await conn.execute(_DELETE, ([row[0] for row in rows],))
                await conn.commit()
                done += len(rows)
            tally.elapsed_s = time.perf_counter() - started
            tally.done.set()


def make() -> BareLoop:
    """The system's ``Bench``."""
    return BareLoop()
