"""A worker process whose plain (``def``) handler records each run in ``<schema>.runs``: the
job's ``n``, the process, the attempt, and when the run started and ended (the database's
clock; ``ended`` stays NULL for a run that never finished).

Usage: ``python -m tests.integration.postgres.threads_app URL SCHEMA CONCURRENCY GRACE LEASE``
(``GRACE`` is the worker's ``shutdown_grace``, "none" for no limit; ``LEASE`` the backend's).
A job sleeps ``sleep_ms`` in its thread. Prints "ready" once connected.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import psycopg
from psycopg import sql

from queuey import Job, JobContext, Queue, QueueSet, RetryPolicy, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.cli import run_until_signal

RUNS_TABLE = "runs"


class ThreadQueues(QueueSet, prefix="threads"):
    work = Queue(prefetch=16, retry=RetryPolicy.fixed(3, "100ms"))


class Nap(Job[ThreadQueues], queue=ThreadQueues.work, name="threads.Nap"):
    n: int
    sleep_ms: int = 0


def runs_ddl(schema: str) -> sql.Composed:
    """The table the handler writes to."""
    return sql.SQL(
        "CREATE TABLE {} (id serial PRIMARY KEY, n int, pid int, attempt int, "
        "started timestamptz, ended timestamptz)"
    ).format(sql.Identifier(schema, RUNS_TABLE))


async def main(url: str, schema: str, concurrency: int, grace: str, lease: str) -> None:
    backend = await PostgresBackend.connect(url, schema=schema, lease=lease, poll_interval="300ms")
    runs = sql.Identifier(schema, RUNS_TABLE)
    start = sql.SQL(
        "INSERT INTO {} (n, pid, attempt, started) VALUES (%s, %s, %s, clock_timestamp()) "
        "RETURNING id"
    ).format(runs)
    end = sql.SQL("UPDATE {} SET ended = clock_timestamp() WHERE id = %s").format(runs)
    worker = Worker(
        ThreadQueues,
        backend,
        concurrency=concurrency,
        shutdown_grace=None if grace == "none" else grace,
        close_backend_on_shutdown=True,
    )

    @worker.handler(Nap)
    def nap(job: Nap, ctx: JobContext) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(start, (job.n, os.getpid(), ctx.attempt)).fetchone()
            assert row is not None
            time.sleep(job.sleep_ms / 1000)
            conn.execute(end, (row[0],))

    print("ready", flush=True)
    await run_until_signal(worker.run, worker.shutdown)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]))
