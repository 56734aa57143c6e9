"""The cost of tracing and metrics on the PostgreSQL drain, in one process.

``python -m bench.observability [JOBS] [ROUNDS]`` (default 20,000 jobs, 3 rounds): per round,
for each mode in turn (so load on a shared machine hits every mode alike), enqueue ``JOBS``
no-op jobs in bulk, then time one ``Worker`` draining them; prints each mode's median jobs/s
and its cost against ``off``. Modes are ``bench.systems._queuey.observability``'s: ``off``,
``metrics``, ``tracing`` (an SDK provider sampling every trace, spans batched to an exporter that
drops them), ``both``, ``sampled`` (both, 10% of traces sampled at enqueue), ``unsampled``
(tracing on, no trace sampled). It runs in a schema of its own (``bench_observe_<pid>``),
dropped at the end, so it never meets another run.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time

from bench.systems import _queuey
from bench.systems._env import DATABASE_URL, drop_schema
from queuey import JobContext, Producer, Worker
from queuey.backends.postgres import PostgresBackend, migrate

MODES = ("off", "metrics", "tracing", "both", "sampled", "unsampled")


async def drain(schema: str, mode: str, jobs: int) -> float:
    """Enqueue ``jobs``, then drain them; returns jobs/s of the drain."""
    _queuey.OBSERVE = "" if mode == "off" else mode
    tracing, metrics = _queuey.observability()
    async with PostgresBackend(DATABASE_URL, schema=schema, retain=None) as backend:
        producer = await Producer.create(_queuey.BenchQueues, backend, tracing=tracing)
        for start in range(0, jobs, 5000):
            batch = [_queuey.Noop(t=0.0) for _ in range(min(5000, jobs - start))]
            await producer.enqueue_many(batch)
        worker = Worker(_queuey.BenchQueues, backend, tracing=tracing, metrics=metrics)
        done = asyncio.Event()
        seen = 0

        @worker.handler(_queuey.Noop)
        async def noop(job: _queuey.Noop, ctx: JobContext) -> None:
            nonlocal seen
            seen += 1
            if seen == jobs:
                done.set()

        started = time.perf_counter()
        running = asyncio.create_task(worker.run())
        await done.wait()
        worker.shutdown()
        await running
        return jobs / (time.perf_counter() - started)


async def main(jobs: int, rounds: int) -> None:
    schema = f"bench_observe_{os.getpid()}"
    await migrate(DATABASE_URL, schema=schema)
    results: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        for _ in range(rounds):
            for mode in MODES:
                results[mode].append(await drain(schema, mode, jobs))
    finally:
        await drop_schema(schema)
    base = statistics.median(results["off"])
    for mode in MODES:
        rate = statistics.median(results[mode])
        runs = ", ".join(f"{r:,.0f}" for r in results[mode])
        print(f"{mode:9} {rate:8,.0f} jobs/s  cost {1 - rate / base:6.1%}  ({runs})")


if __name__ == "__main__":
    arguments = [int(a) for a in sys.argv[1:3]]
    asyncio.run(main(*(arguments + [20_000, 3][len(arguments) :])))
