"""``python -m bench.claim [LATER ...]``: what one claim costs as rows scheduled for later pile
up beside the due ones (PostgreSQL).

For each count of later rows (default 0, 100,000 and 1,000,000), on a fresh schema: 5 rows due
now (a short claim: a worker woken by one enqueue) and 20,000 due now (a full claim of 256, a
drain), beside that many rows due in an hour, after ``VACUUM ANALYZE``. Each claim is the
worker's own statement with ``limit`` 256, sent ``ROUNDS`` times on one connection and rolled
back each time, so every round sees the same rows. Prints the median round trip (statement and
rollback) in milliseconds. ``BENCH_DATABASE_URL`` overrides the local database.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import psycopg
from psycopg import sql

from bench.systems._env import DATABASE_URL, SUFFIX, drop_schema
from queuey.backends.postgres import migrate
from queuey.backends.postgres._sql import Statements

SCHEMA = f"bench_claim{SUFFIX}"
ROUNDS = 200
_DUE = (
    "INSERT INTO {} (id, kind, queue, job_type, payload, priority)"
    " SELECT gen_random_uuid(), 'job', 'q', 'bench.Noop', '{{\"t\": 0}}', g %% 2"
    " FROM generate_series(1, %(rows)s) AS g"
)
_LATER = (
    "INSERT INTO {} (id, kind, queue, job_type, payload, available_at)"
    " SELECT gen_random_uuid(), 'job', 'q', 'bench.Noop', '{{\"t\": 0}}',"
    " now() + interval '1 hour' FROM generate_series(1, %(rows)s)"
)


async def _fill(due: int, later: int) -> Statements:
    """A fresh schema holding ``due`` rows due now and ``later`` due in an hour."""
    await drop_schema(SCHEMA)
    await migrate(DATABASE_URL, schema=SCHEMA)
    table = sql.Identifier(SCHEMA, "queue_message")
    async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
        for statement, rows in ((_DUE, due), (_LATER, later)):
            if rows:
                await conn.execute(sql.SQL(statement).format(table), {"rows": rows})
        await conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    return Statements(SCHEMA, "queue_message")


async def _median_ms(statements: Statements) -> tuple[float, int]:
    """The median round trip of the claim (ms) and the rows one claim takes."""
    params: dict[str, object] = {
        "kind": "job",
        "queue": "q",
        "app": None,
        "limit": 256,
        "owner": "bench",
        "lease": 30.0,
        "job_types": None,
    }
    times, taken = [], 0
    async with await psycopg.AsyncConnection.connect(DATABASE_URL) as conn:
        for _ in range(ROUNDS):
            started = time.perf_counter()
            cursor = await conn.execute(statements["claim"], params)
            taken = sum(1 for row in await cursor.fetchall() if row[0] is not None)
            await conn.rollback()
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), taken


async def _run(later_counts: list[int]) -> None:
    print(f"{'later rows':>12} {'due rows':>9} {'claimed':>8} {'median ms':>10}")
    try:
        for later in later_counts:
            for due in (5, 20_000):
                median, taken = await _median_ms(await _fill(due, later))
                print(f"{later:>12,} {due:>9,} {taken:>8} {median:>10.2f}", flush=True)
    finally:
        await drop_schema(SCHEMA)


def main() -> None:
    """Parse the later-row counts and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.claim")
    parser.add_argument("later", nargs="*", type=int, default=[0, 100_000, 1_000_000])
    asyncio.run(_run(parser.parse_args().later))


if __name__ == "__main__":
    main()
