"""The target of ``queuey worker tests.integration.postgres.processes_app:build --processes N``:
a ``threads_app`` worker (each run of a ``Nap`` recorded in ``<schema>.runs`` with its
process) on the schema named by ``QUEUEY_TEST_SCHEMA``, with a 1 s lease so that the jobs of a
killed process come back quickly."""

from __future__ import annotations

import os
import time

import psycopg
from psycopg import sql

from queuey import JobContext, Worker
from queuey.backends.postgres import PostgresBackend
from tests.integration.postgres.threads_app import RUNS_TABLE, Nap, ThreadQueues


async def build() -> Worker[ThreadQueues]:
    """The worker of one process."""
    url, schema = os.environ["QUEUEY_DATABASE_URL"], os.environ["QUEUEY_TEST_SCHEMA"]
    backend = PostgresBackend(url, schema=schema, lease="1s", poll_interval="300ms")
    insert = sql.SQL("INSERT INTO {} (n, pid, attempt, started) VALUES (%s, %s, %s, now())")
    record = insert.format(sql.Identifier(schema, RUNS_TABLE))
    worker = Worker(ThreadQueues, backend, concurrency=4)

    @worker.handler(Nap)
    def nap(job: Nap, ctx: JobContext) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(record, (job.n, os.getpid(), ctx.attempt))
        time.sleep(job.sleep_ms / 1000)

    return worker
