"""``python -m bench.unique``: what a unique key costs an enqueue on PostgreSQL.

Measures, on a fresh schema each, sequential single enqueues (``enqueue``) and bulk enqueues
(``enqueue_many`` of ``BULK`` jobs) of the same small job, declared without ``unique`` and
with ``unique=Unique(by=("n",))`` (every key new, so each one inserts), plus single unique
enqueues that are refused (the same key again). Prints jobs per second and microseconds per
job, best of ``REPEAT`` rounds. ``BENCH_DATABASE_URL`` overrides the local database.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable

from bench.systems._env import DATABASE_URL, drop_schema
from queuey import Job, Producer, Queue, QueueSet, Unique
from queuey.backends.postgres import PostgresBackend, migrate

SINGLE = 2000
BULK = 1000
BULK_CALLS = 10
REPEAT = 3


class BenchQueues(QueueSet, prefix="bench"):
    unique = Queue()


class Plain(Job[BenchQueues], queue=BenchQueues.unique, name="bench.Plain"):
    n: int


class Keyed(
    Job[BenchQueues], queue=BenchQueues.unique, name="bench.Keyed", unique=Unique(by=("n",))
):
    n: int


Case = Callable[[Producer[BenchQueues]], Awaitable[int]]


async def single_plain(producer: Producer[BenchQueues]) -> int:
    for n in range(SINGLE):
        await producer.enqueue(Plain(n=n))
    return SINGLE


async def single_unique(producer: Producer[BenchQueues]) -> int:
    for n in range(SINGLE):
        await producer.enqueue(Keyed(n=n))
    return SINGLE


async def single_refused(producer: Producer[BenchQueues]) -> int:
    await producer.enqueue(Keyed(n=-1))
    for _ in range(SINGLE):
        await producer.enqueue(Keyed(n=-1))
    return SINGLE


async def bulk_plain(producer: Producer[BenchQueues]) -> int:
    for call in range(BULK_CALLS):
        await producer.enqueue_many([Plain(n=call * BULK + n) for n in range(BULK)])
    return BULK * BULK_CALLS


async def bulk_unique(producer: Producer[BenchQueues]) -> int:
    for call in range(BULK_CALLS):
        await producer.enqueue_many([Keyed(n=call * BULK + n) for n in range(BULK)])
    return BULK * BULK_CALLS


CASES: dict[str, Case] = {
    "enqueue, plain": single_plain,
    "enqueue, unique (inserted)": single_unique,
    "enqueue, unique (refused)": single_refused,
    f"enqueue_many x{BULK}, plain": bulk_plain,
    f"enqueue_many x{BULK}, unique": bulk_unique,
}


async def measure(case: Case) -> float:
    """Seconds per job of ``case`` on a fresh schema."""
    schema = f"bench_unique_{uuid.uuid4().hex[:8]}"
    await migrate(DATABASE_URL, schema=schema)
    try:
        async with PostgresBackend(DATABASE_URL, schema=schema) as backend:
            producer = await Producer.create(BenchQueues, backend)
            await producer.enqueue(Plain(n=-2))  # warm the connection
            start = time.perf_counter()
            jobs = await case(producer)
            return (time.perf_counter() - start) / jobs
    finally:
        await drop_schema(schema)


async def main() -> None:
    print(f"{'case':34} {'jobs/s':>10} {'µs/job':>9}")
    for name, case in CASES.items():
        best = min([await measure(case) for _ in range(REPEAT)])
        print(f"{name:34} {1 / best:10,.0f} {best * 1e6:9.1f}")


if __name__ == "__main__":
    asyncio.run(main())
