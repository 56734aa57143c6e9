"""The SQL limit: what PostgreSQL itself does on this machine, without a client library.

- ``drain``: ``pgbench`` (prepared statements, 2 clients on 2 cores) running queuey's own
  ``claim`` and ``ack`` statements from ``queries.sql`` on a prefilled table, with the batch
  size the queuey worker claims with; rows/s.
- ``enqueue_single``: a bare ``INSERT … RETURNING`` + ``pg_notify`` in one statement through
  psycopg 3 on one connection (the driver queuey uses), one row per round trip.
- ``enqueue_bulk``: the same as one ``INSERT … SELECT unnest`` of every row.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from bench.systems import Tally
from bench.systems._env import DATABASE_URL, SUFFIX, drop_schema
from bench.systems._queuey import BenchQueues
from queuey.backends.postgres import migrate
from queuey.backends.postgres._sql import _raw_queries

__all__ = ["make", "pgbench_script"]

SCHEMA = f"bench_sql{SUFFIX}"
CLIENTS = 2
QUEUE = BenchQueues.noop.name
_TABLE = f'"{SCHEMA}"."queue_message"'
_PAUSED = f'"{SCHEMA}"."queue_message_paused"'
_FLOW_SET = f'"{SCHEMA}"."queue_message_flow_set"'
_BATCHES = f'"{SCHEMA}"."queue_message_batches"'
_INSERT_ONE = sql.SQL(
    "WITH i AS (INSERT INTO {} (id, kind, queue, job_type, payload) "
    "VALUES (%s, 'job', %s, 'bench.Noop', %s::json) RETURNING queue) "
    "SELECT pg_notify('bench_sql', queue) FROM i"
).format(sql.Identifier(SCHEMA, "queue_message"))
_INSERT_MANY = sql.SQL(
    "WITH i AS (INSERT INTO {} (id, kind, queue, job_type, payload) "
    "SELECT id, 'job', %s, 'bench.Noop', p::json FROM unnest(%s::uuid[], %s::text[]) AS r(id, p) "
    "RETURNING queue) SELECT pg_notify('bench_sql', q) FROM (SELECT DISTINCT queue AS q FROM i) s"
).format(sql.Identifier(SCHEMA, "queue_message"))
_PREFILL = sql.SQL(
    "INSERT INTO {} (id, kind, queue, job_type, payload) "
    "SELECT gen_random_uuid(), 'job', %s, 'bench.Noop', '{{\"t\": 0}}'::json "
    "FROM generate_series(1, %s)"
).format(sql.Identifier(SCHEMA, "queue_message"))


def _statement(name: str, values: dict[str, str]) -> str:
    lines = [line for line in _raw_queries()[name].splitlines() if not line.startswith("--")]
    text = "\n".join(lines).replace("{table}", _TABLE).replace("{paused}", _PAUSED)
    text = text.replace("{flow_set}", _FLOW_SET).replace("{batches}", _BATCHES)
    text = text.replace("{{", "{").replace("}}", "}")
    text = text.rstrip().rstrip(";")
    return re.sub(r"%\((\w+)\)s", lambda m: values[m.group(1)], text)


def pgbench_script() -> str:
    """queuey's claim and ack as one pgbench transaction: claim ``:batch`` rows, then record
    them all done (the ids and attempts carried over with ``\\gset``)."""
    owner = "'pgbench'"
    claim = _statement(
        "claim",
        {
            "kind": "'job'",
            "queue": f"'{QUEUE}'",
            "app": "NULL",
            "job_types": "NULL",
            "limit": ":batch",
            "owner": owner,
            "lease": "300",
        },
    )
    ack = _statement(
        "ack", {"ids": ":ids", "attempts": ":attempts", "owner": owner, "channel": "'bench_sql'"}
    )
    # The claim is a WITH … SELECT whose last SELECT returns the rows (and the next due time);
    # the same statement with that SELECT aggregating the ids and attempts for \gset.
    body, last, _ = claim.rpartition("SELECT claimed.*")
    if not last:
        raise RuntimeError("the claim statement no longer ends with SELECT claimed.*")
    return (
        f"{body}"
        "SELECT coalesce(array_agg(claimed.id) FILTER (WHERE claimed.id IS NOT NULL), '{}')"
        " AS ids, coalesce(array_agg(claimed.attempts) FILTER (WHERE claimed.id IS NOT NULL),"
        " '{}') AS attempts, min(due.due_in) AS due_in FROM due LEFT JOIN claimed ON true\n"
        "\\gset\n"
        f"{ack};\n"
    )


def _pgbench() -> str:
    found = shutil.which("pgbench") or next(
        iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/pgbench"), reverse=True)), None
    )
    if found is None:
        raise RuntimeError("pgbench not found (it comes with the PostgreSQL server package)")
    return found


class SqlLimit:
    """The ``Bench`` of the SQL limit (no worker: ``work`` runs pgbench)."""

    def __init__(self) -> None:
        self.batch = BenchQueues.noop.config.prefetch
        self.settings: dict[str, Any] = {
            "drain": f"pgbench -M prepared -c {CLIENTS} -j {CLIENTS}: queuey's claim + ack "
            f"statements, batch {self.batch}",
            "enqueue": "bare INSERT + pg_notify in one statement, psycopg 3, one connection",
        }

    async def setup(self) -> None:
        await drop_schema(SCHEMA)
        await migrate(DATABASE_URL, schema=SCHEMA)

    async def teardown(self) -> None:
        await drop_schema(SCHEMA)

    async def clear(self) -> None:
        async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("TRUNCATE {}").format(sql.Identifier(SCHEMA, "queue_message"))
            )

    async def enqueue(self, payloads: int, bulk: bool, interval_s: float) -> float:
        async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
            started = time.perf_counter()
            if bulk:
                bodies = [json.dumps({"t": time.time()}) for _ in range(payloads)]
                ids = [uuid.uuid4() for _ in range(payloads)]
                await conn.execute(_INSERT_MANY, (QUEUE, ids, bodies))
                return time.perf_counter() - started
            for _ in range(payloads):
                body = json.dumps({"t": time.time()})
                await conn.execute(_INSERT_ONE, (uuid.uuid4(), QUEUE, body))
            return time.perf_counter() - started

    async def work(self, tally: Tally, ready: Callable[[], None]) -> None:
        """Run pgbench over ``tally.expected`` prefilled rows (timed from ``ready``)."""
        per_client = max(1, tally.expected // (CLIENTS * self.batch))
        rows = per_client * CLIENTS * self.batch
        async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
            await conn.execute(_PREFILL, (QUEUE, rows))
            await conn.execute(
                sql.SQL("ANALYZE {}").format(sql.Identifier(SCHEMA, "queue_message"))
            )
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
            script.write(pgbench_script())
        try:
            ready()
            process = await asyncio.create_subprocess_exec(
                _pgbench(),
                "-n",
                "-M",
                "prepared",
                "-c",
                str(CLIENTS),
                "-j",
                str(CLIENTS),
                "-t",
                str(per_client),
                "-D",
                f"batch={self.batch}",
                "-f",
                script.name,
                DATABASE_URL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await process.communicate()
        finally:
            os.unlink(script.name)
        if process.returncode != 0:
            raise RuntimeError(f"pgbench failed: {err.decode()[-2000:]}")
        async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
            cursor = await conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE status = 'done'").format(
                    sql.Identifier(SCHEMA, "queue_message")
                )
            )
            done = (await cursor.fetchone() or (0,))[0]
        if done != rows:
            raise RuntimeError(f"pgbench recorded {done} of {rows} rows done:\n{out.decode()}")
        tps = float(re.findall(r"tps = ([0-9.]+)", out.decode())[-1])
        tally.elapsed_s = rows / (tps * self.batch)
        tally.done.set()


def make() -> SqlLimit:
    """The system's ``Bench``."""
    return SqlLimit()
