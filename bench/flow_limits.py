"""``python -m bench.flow_limits rate|cap``: flow limits under real worker processes on
PostgreSQL, checked from the handlers' own start and end records.

- ``rate``: ``KEYS`` keys (default 200), each with a backlog and ``RateLimit(RATE,
  per="1s", by="tenant")`` (default 5/s), ``PROCESSES`` worker processes (default 4) for ``SECONDS``
  (default 60). Prints each key's achieved rate (min, median, max) over the run and the most
  starts of any key in any 1-second window. Starts are kept in each process's memory and
  written at its shutdown, so recording them does not bound the rate.
- ``cap``: ``Concurrency(3, by="tenant")`` over ``KEYS`` keys and ``JOBS`` jobs of ~20 ms,
  ``PROCESSES`` worker processes, one killed with SIGKILL (and replaced) every
  ``SECONDS / (KILLS + 1)`` seconds, ``KILLS`` times. Prints the most runs of one key at once
  (a killed run ends when its process is killed) and whether every job ran.

Settings are environment variables (``KEYS``, ``RATE``, ``PROCESSES``, ``SECONDS``, ``JOBS``,
``KILLS``); ``BENCH_DATABASE_URL`` overrides the local database.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from bench.systems._env import DATABASE_URL, drop_schema
from queuey import Concurrency, Job, JobContext, Producer, Queue, QueueSet, RateLimit, Worker
from queuey.backends.postgres import PostgresBackend, migrate
from queuey.cli import run_until_signal

KEYS = int(os.environ.get("KEYS", "200"))
RATE = int(os.environ.get("RATE", "5"))
BURST = int(os.environ.get("BURST", "0"))
PROCESSES = int(os.environ.get("PROCESSES", "4"))
SECONDS = float(os.environ.get("SECONDS", "60"))
JOBS = int(os.environ.get("JOBS", "20000"))
KILLS = int(os.environ.get("KILLS", "20"))
RUNS = "CREATE TABLE {} (tenant text, pid int, started timestamptz, ended timestamptz)"


class FlowBench(QueueSet, prefix="flowbench"):
    rated = Queue(prefetch=32)
    capped = Queue(prefetch=32, limits=[Concurrency(3, by="tenant")])


class Rated(Job[FlowBench], queue=FlowBench.rated, name="flowbench.Rated",
            limits=[RateLimit(RATE, per="1s", by="tenant", burst=BURST)]):  # fmt: skip
    tenant: str


class Capped(Job[FlowBench], queue=FlowBench.capped, name="flowbench.Capped"):
    tenant: str


async def worker_main(url: str, schema: str) -> None:
    """One worker process: records each run's start and end (database clock)."""
    backend = await PostgresBackend.connect(url, schema=schema, lease="10s", poll_interval="1s")
    runs = sql.Identifier(schema, "runs")
    insert = sql.SQL(
        "INSERT INTO {} VALUES (%s, %s, clock_timestamp(), NULL) RETURNING ctid"
    ).format(runs)
    end = sql.SQL("UPDATE {} SET ended = clock_timestamp() WHERE ctid = %s").format(runs)
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    lock = asyncio.Lock()
    worker = Worker(FlowBench, backend, concurrency=32, close_backend_on_shutdown=True)

    started: list[tuple[str, int, float]] = []  # kept in memory: one write at shutdown

    @worker.handler(Rated)
    async def rated(job: Rated, ctx: JobContext) -> None:
        started.append((job.tenant, os.getpid(), time.time()))

    @worker.handler(Capped)
    async def capped(job: Capped, ctx: JobContext) -> None:
        async with lock:
            row = await (await conn.execute(insert, (job.tenant, os.getpid()))).fetchone()
        await asyncio.sleep(0.02)
        async with lock:
            await conn.execute(end, (row[0] if row else None,))

    print("ready", flush=True)
    await run_until_signal(worker.run, worker.shutdown)
    copy = sql.SQL("COPY {} (tenant, pid, started) FROM STDIN").format(runs)
    async with conn.cursor().copy(copy) as writer:
        for tenant, pid, at in started:
            await writer.write_row((tenant, pid, datetime.fromtimestamp(at, UTC)))
    await conn.close()


def spawn(schema: str) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "bench.flow_limits", "worker", DATABASE_URL, schema]
    return subprocess.Popen(args)


async def query(statement: sql.Composed | sql.SQL) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
        cursor = await conn.execute(statement)
        rows: list[tuple[Any, ...]] = await cursor.fetchall() if cursor.description else []
        return rows


async def enqueue(schema: str, jobs: list[Job[FlowBench]]) -> None:
    async with PostgresBackend(DATABASE_URL, schema=schema) as backend:
        producer = await Producer.create(FlowBench, backend)
        for i in range(0, len(jobs), 5000):
            await producer.enqueue_many(jobs[i : i + 5000])


async def rate(schema: str) -> None:
    backlog = int(RATE * SECONDS * 1.3) + 10
    await enqueue(schema, [Rated(tenant=f"t{k}") for _ in range(backlog) for k in range(KEYS)])
    procs = [spawn(schema) for _ in range(PROCESSES)]
    await asyncio.sleep(SECONDS)
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait()
    runs = sql.Identifier(schema, "runs")
    per_key = await query(sql.SQL(
        "SELECT tenant, count(*) / greatest(extract(epoch FROM max(started) - min(started)), 1)"
        " FROM {} GROUP BY 1").format(runs))  # fmt: skip
    rates = sorted(float(r[1]) for r in per_key)
    worst = await query(sql.SQL(
        "SELECT max(c) FROM (SELECT (SELECT count(*) FROM {runs} b WHERE b.tenant = a.tenant"
        " AND b.started >= a.started AND b.started < a.started + interval '1 second') AS c"
        " FROM {runs} a) AS w").format(runs=runs))  # fmt: skip
    print(f"rate: {KEYS} keys x {RATE}/s, {PROCESSES} processes, {SECONDS:g} s")
    print(f"  per-key starts/s: min {rates[0]:.3f} median {statistics.median(rates):.3f} "
          f"max {rates[-1]:.3f} (limit {RATE}); total {sum(rates):.1f}/s")  # fmt: skip
    print(f"  most starts of one key in any 1-s window: {worst[0][0]} (limit {RATE})")


async def cap(schema: str) -> None:
    await enqueue(schema, [Capped(tenant=f"t{n % KEYS}") for n in range(JOBS)])
    procs = [spawn(schema) for _ in range(PROCESSES)]
    kill_times: dict[int, float] = {}
    rng = random.Random(29)
    deadline = time.monotonic() + SECONDS * 4
    for _ in range(KILLS):
        await asyncio.sleep(SECONDS / (KILLS + 1))
        victim = rng.choice([p for p in procs if p.poll() is None])
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        at = await query(sql.SQL("SELECT extract(epoch FROM clock_timestamp())"))
        kill_times[victim.pid] = float(at[0][0])
        procs.append(spawn(schema))
    table = sql.Identifier(schema, "queue_message")
    while time.monotonic() < deadline:
        left = await query(sql.SQL("SELECT count(*) FROM {} WHERE status <> 'done'").format(table))
        if left[0][0] == 0:
            break
        await asyncio.sleep(1)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait()
    rows = await query(sql.SQL(
        "SELECT tenant, pid, extract(epoch FROM started), extract(epoch FROM ended) FROM {}"
    ).format(sql.Identifier(schema, "runs")))  # fmt: skip
    peak = 0
    by_key: dict[str, list[tuple[float, int]]] = {}
    for tenant, pid, started, ended in rows:
        stop = float(ended) if ended is not None else kill_times.get(int(pid), float("inf"))
        by_key.setdefault(str(tenant), []).extend([(float(started), 1), (stop, -1)])
    for events in by_key.values():
        held = 0
        for _, step in sorted(events):
            held += step
            peak = max(peak, held)
    done = await query(sql.SQL("SELECT count(*) FROM {} WHERE status = 'done'").format(table))
    print(f"cap: {JOBS} jobs over {KEYS} keys, cap 3 per key, {PROCESSES} processes, "
          f"{KILLS} SIGKILLs")  # fmt: skip
    print(f"  most runs of one key at once: {peak}; done {done[0][0]} of {JOBS}; "
          f"runs recorded {len(rows)}")  # fmt: skip


async def main(mode: str) -> None:
    schema = f"flowbench_{uuid.uuid4().hex[:8]}"
    await migrate(DATABASE_URL, schema=schema)
    await query(sql.SQL(RUNS).format(sql.Identifier(schema, "runs")))
    try:
        await (rate(schema) if mode == "rate" else cap(schema))
    finally:
        await drop_schema(schema)


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        asyncio.run(worker_main(sys.argv[2], sys.argv[3]))
    elif sys.argv[1] == "proofs":
        from bench import flow_proofs

        names = sys.argv[2:] or list(flow_proofs.PROOFS)
        sys.exit(asyncio.run(flow_proofs.main(names)))
    else:
        asyncio.run(main(sys.argv[1]))
