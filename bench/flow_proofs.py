"""``python -m bench.flow_limits proofs [a|a2|b|c|d|e ...]``: the flow-limit proofs on real
PostgreSQL, with ``queuey worker bench.flow_app:make_worker --processes N`` as the workers,
checked from the handlers' own start and end records. Prints one PASS/FAIL line per criterion.

- ``a``: ``KEYS`` keys (200) each with a backlog, ``RateLimit(5, per="1s", by="tenant",
  burst=BURST)``: every key's starts over ``SECONDS`` (60, after a 3 s warm-up) within 5% of
  5/s; no 1-s window of any key above 5 + BURST.
- ``a2``: the same with ``RateLimit(600, per="1s", burst=GLOBAL_BURST)`` on the whole queue:
  the whole within 5% of 600/s; no 1-s window of any key above 5 + BURST.
- ``b``: one key, ``RateLimit(100, per="1s", burst=10)`` and ``RateLimit(1000, per="10s",
  burst=50)``: no 1-s window above 110, no 10-s window above 1,050.
- ``c``: ``Concurrency(3, by="tenant")``, ``JOBS`` jobs (200,000) over 20 keys, runs of 20 ms,
  ``KILLS`` (20) worker processes killed with SIGKILL: never 4 runs of a key at once (a killed
  run ends at its kill), every job ended, every row done.
- ``d``: ``Concurrency(4, by="tenant")``, 20 tenants enqueueing 100 jobs/s in sum for
  ``FAIR_SECONDS`` (30), runs of 20 ms; once alone, once behind one tenant's ``BACKLOG``
  (100,000) jobs: the other tenants' p99 wait (start less enqueue) at most 2x the first.
- ``e``: ``DRAIN`` (20,000) jobs drained by the workers, plain and with limits declared but
  never reached (``RateLimit(100000, per="1s", by="tenant")``, ``Concurrency(10000,
  by="tenant")``), interleaved twice: limited >= 0.9x plain (starts/s, first to last start).

``PROCESSES`` (4) worker processes of ``CONCURRENCY`` (128) handler slots each, the queue's
prefetch the same (``FLOWPROOF_PREFETCH`` overrides it): a limited queue's claims take turns, so
the rows one claim may take bound what the queue starts per second.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from bench.flow_app import ProofQueues, Work
from bench.systems._env import DATABASE_URL, drop_schema
from queuey import Producer
from queuey.backends.postgres import PostgresBackend, migrate

KEYS = int(os.environ.get("KEYS", "200"))
BURST = int(os.environ.get("BURST", "1"))
GLOBAL_BURST = int(os.environ.get("GLOBAL_BURST", "300"))
SECONDS = float(os.environ.get("SECONDS", "60"))
JOBS = int(os.environ.get("JOBS", "200000"))
KILLS = int(os.environ.get("KILLS", "20"))
BACKLOG = int(os.environ.get("BACKLOG", "100000"))
FAIR_SECONDS = float(os.environ.get("FAIR_SECONDS", "30"))
DRAIN = int(os.environ.get("DRAIN", "20000"))
PROCESSES = int(os.environ.get("PROCESSES", "4"))
CONCURRENCY = int(os.environ.get("CONCURRENCY", "128"))
WARMUP = 3.0


@dataclass
class RunRecord:
    job_id: str
    tenant: str
    pid: int
    start: float
    enqueued: float
    end: float | None = None


def verdict(name: str, ok: bool, detail: str) -> bool:
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)
    return ok


class Workers:
    """``queuey worker bench.flow_app:make_worker --processes N`` with the app's settings."""

    def __init__(self, schema: str, settings: dict[str, str]) -> None:
        self.records = tempfile.mkdtemp(prefix="flowproof-")
        env = dict(os.environ, FLOWPROOF_SCHEMA=schema, FLOWPROOF_RECORDS=self.records)
        env.update(settings)
        env.setdefault("FLOWPROOF_CONCURRENCY", str(CONCURRENCY))
        env.setdefault("FLOWPROOF_PREFETCH", env["FLOWPROOF_CONCURRENCY"])
        args = [sys.executable, "-m", "queuey", "worker", "bench.flow_app:make_worker",
                "--processes", str(PROCESSES)]  # fmt: skip
        self.supervisor = subprocess.Popen(args, env=env, stderr=subprocess.DEVNULL)
        self.killed: dict[int, float] = {}

    async def started(self) -> None:
        """Wait until a handler has written its first record."""
        while not any(os.path.getsize(os.path.join(self.records, name))
                      for name in os.listdir(self.records)):  # fmt: skip
            await asyncio.sleep(0.1)

    def children(self) -> list[int]:
        path = f"/proc/{self.supervisor.pid}/task/{self.supervisor.pid}/children"
        try:
            with open(path) as file:
                return [int(pid) for pid in file.read().split()]
        except FileNotFoundError:
            return []

    def kill_one(self, rng: random.Random) -> None:
        pids = self.children()
        if pids:
            victim = rng.choice(pids)
            os.kill(victim, signal.SIGKILL)
            self.killed[victim] = time.time()

    def stop(self) -> list[RunRecord]:
        self.supervisor.send_signal(signal.SIGTERM)
        try:
            self.supervisor.wait(120)
        except subprocess.TimeoutExpired:
            self.supervisor.kill()
            self.supervisor.wait()
        runs = read_records(self.records)
        shutil.rmtree(self.records, ignore_errors=True)
        return runs


def read_records(directory: str) -> list[RunRecord]:
    runs: list[RunRecord] = []
    for name in os.listdir(directory):
        pid = int(name.split(".")[0])
        open_runs: dict[str, RunRecord] = {}
        with open(os.path.join(directory, name)) as file:
            for line in file:
                parts = line.split()
                if len(parts) == 5 and parts[0] == "S":
                    run = RunRecord(parts[1], parts[2], pid, float(parts[3]), int(parts[4]) / 1e3)
                    open_runs[parts[1]] = run
                    runs.append(run)
                elif len(parts) == 4 and parts[0] == "E" and parts[1] in open_runs:
                    open_runs.pop(parts[1]).end = float(parts[3])
    return runs


async def query(statement: sql.Composed | sql.SQL) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(DATABASE_URL, autocommit=True) as conn:
        cursor = await conn.execute(statement)
        return await cursor.fetchall() if cursor.description else []


async def enqueue(schema: str, tenants: list[str]) -> None:
    async with PostgresBackend(DATABASE_URL, schema=schema) as backend:
        producer = await Producer.create(ProofQueues, backend)
        for i in range(0, len(tenants), 5000):
            await producer.enqueue_many([Work(tenant=t) for t in tenants[i : i + 5000]])


async def fresh_schema() -> str:
    schema = f"flowproof_{uuid.uuid4().hex[:8]}"
    await migrate(DATABASE_URL, schema=schema)
    return schema


async def pending(schema: str) -> int:
    table = sql.Identifier(schema, "queue_message")
    rows = await query(sql.SQL("SELECT count(*) FROM {} WHERE status <> 'done'").format(table))
    return int(rows[0][0])


def most_in_window(times: list[float], width: float) -> int:
    """The most of ``times`` (sorted) in any half-open window ``[t, t + width)``."""
    return max((bisect_left(times, t + width) - i for i, t in enumerate(times)), default=0)


def windows_over(runs: list[RunRecord], bound: int, begin: float) -> str:
    """The most starts of one key in any 1-s window, over the whole run and from ``begin``
    (the measured span), and how many windows from ``begin`` hold more than ``bound``."""
    whole = max(most_in_window(t, 1.0) for t in per_key_starts(runs).values())
    later = [run for run in runs if run.start >= begin]
    over, worst = 0, 0
    for times in per_key_starts(later).values():
        counts = [bisect_left(times, t + 1.0) - i for i, t in enumerate(times)]
        over += sum(1 for c in counts if c > bound)
        worst = max([worst, *counts])
    return f"{worst} in the measured span ({over} windows above {bound}), {whole} over the run"


def per_key_starts(runs: list[RunRecord]) -> dict[str, list[float]]:
    starts: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        starts[run.tenant].append(run.start)
    for times in starts.values():
        times.sort()
    return starts


async def rated_run(job_limits: str, queue_limits: str = "") -> list[RunRecord]:
    """``KEYS`` keys with a backlog, workers for ``SECONDS`` plus the warm-up."""
    schema = await fresh_schema()
    try:
        backlog = int(5 * (SECONDS + WARMUP + 10) * 1.2)
        await enqueue(schema, [f"t{k}" for _ in range(backlog) for k in range(KEYS)])
        settings = {"FLOWPROOF_JOB_LIMITS": job_limits, "FLOWPROOF_QUEUE_LIMITS": queue_limits}
        workers = Workers(schema, settings)
        await workers.started()
        await asyncio.sleep(SECONDS + WARMUP + 2)
        return workers.stop()
    finally:
        await drop_schema(schema)


def measured(runs: list[RunRecord]) -> tuple[float, list[RunRecord]]:
    """The start of the measured span (the first start plus the warm-up) and its runs."""
    begin = min(run.start for run in runs) + WARMUP
    return begin, [run for run in runs if begin <= run.start < begin + SECONDS]


async def proof_a() -> bool:
    runs = await rated_run(f"rate:5:1:{BURST}")
    if not runs:
        return verdict("a rate", False, "no starts recorded")
    begin, inside = measured(runs)
    rates = sorted(len(t) / SECONDS for t in per_key_starts(inside).values())
    worst = max(most_in_window(t, 1.0) for t in per_key_starts(inside).values())
    ok = verdict("a rate", len(rates) == KEYS and 4.75 <= rates[0] and rates[-1] <= 5.25,
                 f"{KEYS} keys x 5/s burst {BURST} over {SECONDS:g} s: per-key starts/s min "
                 f"{rates[0]:.3f} median {statistics.median(rates):.3f} max {rates[-1]:.3f}, "
                 f"total {sum(rates):.1f}/s")  # fmt: skip
    return (
        verdict(
            "a windows",
            worst <= 5 + BURST,
            f"most starts of one key in any 1-s window (bound {5 + BURST}): "
            + windows_over(runs, 5 + BURST, begin),
        )
        and ok
    )


async def proof_a2() -> bool:
    runs = await rated_run(f"rate:5:1:{BURST}", f"rate-all:600:1:{GLOBAL_BURST}")
    if not runs:
        return verdict("a2 global rate", False, "no starts recorded")
    begin, inside = measured(runs)
    total = len(inside) / SECONDS
    worst = max(most_in_window(t, 1.0) for t in per_key_starts(inside).values())
    ok = verdict("a2 global rate", 570 <= total <= 630,
                 f"600/s (burst {GLOBAL_BURST}) over {KEYS} keys x 5/s: {total:.1f}/s "
                 f"over {SECONDS:g} s")  # fmt: skip
    return (
        verdict(
            "a2 key windows",
            worst <= 5 + BURST,
            f"most starts of one key in any 1-s window (bound {5 + BURST}): "
            + windows_over(runs, 5 + BURST, begin),
        )
        and ok
    )


async def proof_b() -> bool:
    schema = await fresh_schema()
    try:
        await enqueue(schema, ["solo"] * 4000)
        workers = Workers(schema, {"FLOWPROOF_JOB_LIMITS": "rate:100:1:10;rate:1000:10:50"})
        await asyncio.sleep(30)
        runs = workers.stop()
    finally:
        await drop_schema(schema)
    times = sorted(run.start for run in runs)
    if len(times) < 2:
        return verdict("b two windows", False, f"{len(times)} starts recorded")
    second, tenth = most_in_window(times, 1.0), most_in_window(times, 10.0)
    span = times[-1] - times[0]
    detail = (f"100/s burst 10 and 1,000/10 s burst 50 on one key: most in any 1-s window "
              f"{second} (bound 110), in any 10-s window {tenth} (bound 1,050); "
              f"{len(times)} starts in {span:.1f} s ({len(times) / span:.1f}/s)")  # fmt: skip
    return verdict("b two windows", second <= 110 and tenth <= 1050, detail)


def most_at_once(runs: list[RunRecord], killed: dict[int, float]) -> int:
    """The most runs of one key at once; a run without an end ended when its process was
    killed (or never, if it was not)."""
    events: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for run in runs:
        end = run.end if run.end is not None else killed.get(run.pid, float("inf"))
        events[run.tenant] += [(run.start, 1), (end, -1)]
    peak = 0
    for items in events.values():
        held = 0
        for _, step in sorted(items):  # an end at the same instant as a start comes first
            held += step
            peak = max(peak, held)
    return peak


async def proof_c() -> bool:
    schema = await fresh_schema()
    try:
        await enqueue(schema, [f"k{n % 20}" for n in range(JOBS)])
        settings = {"FLOWPROOF_JOB_LIMITS": "cap:3", "FLOWPROOF_SLEEP": "0.02",
                    "FLOWPROOF_LEASE": "3"}  # fmt: skip
        workers, rng = Workers(schema, settings), random.Random(29)
        deadline = time.monotonic() + 1800
        await asyncio.sleep(5)
        while len(workers.killed) < KILLS and time.monotonic() < deadline:
            workers.kill_one(rng)
            await asyncio.sleep(3)
        while await pending(schema) and time.monotonic() < deadline:
            await asyncio.sleep(2)
        runs = workers.stop()
        table = sql.Identifier(schema, "queue_message")
        done = await query(sql.SQL("SELECT count(*) FROM {} WHERE status = 'done'").format(table))
    finally:
        await drop_schema(schema)
    peak = most_at_once(runs, workers.killed)
    ended = {run.job_id for run in runs if run.end is not None}
    cut = sum(1 for run in runs if run.end is None and run.pid in workers.killed)
    ok = verdict("c cap", peak <= 3,
                 f"cap 3 per key, {JOBS:,} jobs of 20 ms over 20 keys, "
                 f"{len(workers.killed)} SIGKILLs ({cut} runs cut by them): "
                 f"most runs of one key at once {peak}")  # fmt: skip
    return (
        verdict(
            "c nothing lost",
            len(ended) == JOBS == int(done[0][0]),
            f"jobs whose run ended {len(ended):,}, rows done {done[0][0]:,} "
            f"of {JOBS:,}; runs recorded {len(runs):,}",
        )
        and ok
    )


async def fair_run(backlog: int) -> list[float]:
    """The other tenants' waits (start less enqueue, seconds; ``inf``: never started)."""
    schema = await fresh_schema()
    try:
        await enqueue(schema, ["big"] * backlog)
        settings = {"FLOWPROOF_JOB_LIMITS": "cap:4", "FLOWPROOF_SLEEP": "0.02",
                    "FLOWPROOF_CONCURRENCY": "16"}  # fmt: skip
        workers = Workers(schema, settings)
        await asyncio.sleep(5)
        sent = 0
        async with PostgresBackend(DATABASE_URL, schema=schema) as backend:
            producer = await Producer.create(ProofQueues, backend)
            began = time.monotonic()
            while time.monotonic() - began < FAIR_SECONDS:
                await producer.enqueue_many([Work(tenant=f"o{i}") for i in range(20)])
                sent += 20
                await asyncio.sleep(0.2)
        await asyncio.sleep(3)
        runs = workers.stop()
    finally:
        await drop_schema(schema)
    waits = [run.start - run.enqueued for run in runs if run.tenant != "big"]
    return sorted(waits) + [float("inf")] * (sent - len(waits))


def p99(values: list[float]) -> float:
    return values[min(len(values) - 1, int(len(values) * 0.99))]


async def proof_d() -> bool:
    alone = p99(await fair_run(0))
    behind = p99(await fair_run(BACKLOG))
    if not alone:
        return verdict("d fairness", False, "no wait recorded alone")
    return verdict("d fairness", behind <= 2 * alone,
                   f"other tenants' p99 wait (cap 4 per tenant, 100 jobs/s from 20 tenants): "
                   f"{alone * 1e3:.0f} ms alone, {behind * 1e3:.0f} ms behind a "
                   f"{BACKLOG:,}-job backlog ({behind / alone:.2f}x, bound 2x)")  # fmt: skip


async def drain_rate(job_limits: str) -> float:
    schema = await fresh_schema()
    try:
        await enqueue(schema, [f"t{n % 200}" for n in range(DRAIN)])
        workers = Workers(schema, {"FLOWPROOF_JOB_LIMITS": job_limits})
        deadline = time.monotonic() + 600
        while await pending(schema) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        runs = workers.stop()
    finally:
        await drop_schema(schema)
    times = sorted(run.start for run in runs)
    return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0


async def proof_e() -> bool:
    never = "rate:100000:1:0;cap:10000"
    plain, limited = [], []
    for _ in range(2):
        plain.append(await drain_rate(""))
        limited.append(await drain_rate(never))
    ratio = sum(limited) / sum(plain)
    shown = ", ".join(f"{p:,.0f} / {q:,.0f}" for p, q in zip(plain, limited, strict=True))
    return verdict("e drain", ratio >= 0.9,
                   f"{DRAIN:,} jobs, {PROCESSES} processes, plain / limits never reached "
                   f"(jobs/s, interleaved): {shown}; {ratio:.2f}x (bound 0.9x)")  # fmt: skip


PROOFS = {"a": proof_a, "a2": proof_a2, "b": proof_b, "c": proof_c, "d": proof_d, "e": proof_e}


async def main(names: list[str]) -> int:
    load = os.getloadavg()
    print(f"flow proofs {' '.join(names)}: {PROCESSES} processes x {CONCURRENCY}, load "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)  # fmt: skip
    results = [await PROOFS[name]() for name in names]
    return 0 if all(results) else 1
