"""``python -m bench.results_latency``: how long from ``enqueue`` to an awaited result on
PostgreSQL, beside a plain enqueue → run.

One process, two backends on one fresh schema (a producer's and a worker's, as an app and its
worker would have), one job at a time so nothing queues: the handler sleeps 1 ms. For each of
``ROUNDS`` jobs (after ``WARMUP``):

- plain: ``enqueue`` of a job without a result type until its handler has returned (an event
  the handler sets, in process: no database round trip after the run);
- result: ``enqueue`` of a job declaring a result type until ``await handle.result()``
  returns (the ack writes the result and notifies; the producer's LISTEN connection wakes the
  awaiter, which reads the row back).

Prints p50 and p90 in milliseconds. ``BENCH_DATABASE_URL`` overrides the local database.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid

from pydantic import BaseModel

from bench.systems._env import DATABASE_URL, drop_schema
from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend, migrate

ROUNDS = 300
WARMUP = 30


class Echo(BaseModel):
    n: int


class LatencyQueues(QueueSet, prefix="bench"):
    latency = Queue(prefetch=8)


class Plain(Job[LatencyQueues], queue=LatencyQueues.latency, name="bench.LatencyPlain"):
    n: int


class Returning(
    Job[LatencyQueues, Echo], queue=LatencyQueues.latency, name="bench.LatencyReturning"
):
    n: int


async def measure() -> dict[str, list[float]]:
    """Milliseconds per job of each case, in one fresh schema."""
    schema = f"bench_results_{uuid.uuid4().hex[:8]}"
    await migrate(DATABASE_URL, schema=schema)
    ran: dict[int, asyncio.Event] = {}
    try:
        producing = PostgresBackend(DATABASE_URL, schema=schema, poll_interval="5s")
        working = PostgresBackend(DATABASE_URL, schema=schema, poll_interval="5s")
        async with producing, working:
            producer = await Producer.create(LatencyQueues, producing)
            worker = Worker(LatencyQueues, working)

            @worker.handler(Plain)
            async def plain(job: Plain, ctx: JobContext) -> None:
                await asyncio.sleep(0.001)
                ran[job.n].set()

            @worker.handler(Returning)
            async def returning(job: Returning, ctx: JobContext) -> Echo:
                await asyncio.sleep(0.001)
                return Echo(n=job.n)

            running = asyncio.create_task(worker.run())
            times: dict[str, list[float]] = {"plain enqueue -> run": [], "enqueue -> result": []}
            try:
                for n in range(WARMUP + ROUNDS):
                    ran[n] = asyncio.Event()
                    start = time.perf_counter()
                    await producer.enqueue(Plain(n=n))
                    await ran[n].wait()
                    del ran[n]
                    plain_ms = (time.perf_counter() - start) * 1000
                    start = time.perf_counter()
                    handle = await producer.enqueue(Returning(n=n))
                    assert (await handle.result(timeout=30)).n == n
                    result_ms = (time.perf_counter() - start) * 1000
                    if n >= WARMUP:
                        times["plain enqueue -> run"].append(plain_ms)
                        times["enqueue -> result"].append(result_ms)
            finally:
                worker.shutdown()
                await running
            return times
    finally:
        await drop_schema(schema)


async def main() -> None:
    times = await measure()
    print(f"{'case (1 ms handler)':24} {'p50 ms':>8} {'p90 ms':>8}  n={ROUNDS}")
    for name, samples in times.items():
        deciles = statistics.quantiles(samples, n=10)
        print(f"{name:24} {statistics.median(samples):8.2f} {deciles[8]:8.2f}")


if __name__ == "__main__":
    asyncio.run(main())
