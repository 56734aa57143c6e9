"""``python -m bench.results_latency``: how long from ``enqueue`` to an awaited result on
PostgreSQL, beside a plain enqueue → run.

One process, two backends on one fresh schema (a producer's and a worker's, as an app and its
worker would have), one job at a time so nothing queues: the handler sleeps 1 ms. For each of
``ROUNDS`` jobs (after ``WARMUP``):

- plain: ``enqueue`` of a job without a result type until its handler has returned (an event
  the handler sets, in process: no database round trip after the run);
- result: ``enqueue`` of a job declaring a result type until ``await handle.result()``
  returns (the ack writes the result and notifies with it; the producer's LISTEN connection
  wakes the awaiter with the result the notification carries, no read back).

The two cases alternate job by job, so a change of load weighs on both alike. Prints, side by
side, p50 and p90 in milliseconds of each case and what the result adds to the plain run, with
the machine's load average (``os.getloadavg``) before and after: the result path waits for one
more durable commit (the ack's), whose disk flush grows with the machine's load.
``BENCH_DATABASE_URL`` overrides the local database; ``--rounds N`` sets the jobs per case.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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


PLAIN = "plain enqueue -> run"
RESULT = "enqueue -> result"


async def measure(rounds: int = ROUNDS) -> dict[str, list[float]]:
    """Milliseconds per job of each case (``rounds`` jobs each), in one fresh schema."""
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
            times: dict[str, list[float]] = {PLAIN: [], RESULT: []}
            try:
                for n in range(WARMUP + rounds):
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
                        times[PLAIN].append(plain_ms)
                        times[RESULT].append(result_ms)
            finally:
                worker.shutdown()
                await running
            return times
    finally:
        await drop_schema(schema)


def load() -> str:
    """The load averages over 1, 5 and 15 minutes."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def report(times: dict[str, list[float]], before: str, after: str) -> str:
    """The table: both cases side by side, and what the result adds."""
    rounds = len(times[PLAIN])
    rows = [f"{'case (1 ms handler)':24} {'p50 ms':>8} {'p90 ms':>8}  n={rounds}"]
    p50, p90 = {}, {}
    for name, samples in times.items():
        p50[name], p90[name] = statistics.median(samples), statistics.quantiles(samples, n=10)[8]
        rows.append(f"{name:24} {p50[name]:8.2f} {p90[name]:8.2f}")
    added = p50[RESULT] - p50[PLAIN]
    rows.append(f"{'result - plain':24} {added:8.2f} {p90[RESULT] - p90[PLAIN]:8.2f}")
    rows.append(f"load average: {before} (before), {after} (after)")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.results_latency")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="jobs per case")
    args = parser.parse_args()
    before = load()
    times = asyncio.run(measure(args.rounds))
    print(report(times, before, load()))


if __name__ == "__main__":
    main()
