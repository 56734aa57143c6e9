"""``python -m bench.handler_processes [--jobs N] [--concurrency C]``: the per-job cost of
running plain (``def``) handlers in processes (``plain_handlers="process"``) against threads.

Runs ``N`` no-op plain jobs through a ``Worker`` on the memory backend (so the queue costs the
same both ways) with each setting, after a warm-up of ``C`` jobs that starts the processes, and
prints jobs per second and the extra microseconds per job of the process setting. Process
start-up is measured apart (the warm-up).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Literal

from queuey import Job, Producer, Queue, QueueSet, Worker
from queuey.backends.memory import MemoryBackend


class CostQueues(QueueSet, prefix="cost"):
    work = Queue(prefetch=64)


class Noop(Job[CostQueues], queue=CostQueues.work, name="cost.Noop"):
    n: int


def noop(job: Noop) -> None:
    """A plain handler doing nothing: what remains is the cost of running it."""


async def _drain(worker: Worker[CostQueues], producer: Producer[CostQueues], jobs: int) -> float:
    stats = worker.stats[CostQueues.work.name]
    target = stats.succeeded + jobs
    await producer.enqueue_many([Noop(n=n) for n in range(jobs)])
    began = time.perf_counter()
    while stats.succeeded < target:
        await asyncio.sleep(0.001)
    return time.perf_counter() - began


async def _measure(
    where: Literal["thread", "process"], jobs: int, concurrency: int
) -> tuple[float, float]:
    """(warm-up seconds, seconds for ``jobs`` jobs)."""
    backend = MemoryBackend()
    producer = await Producer.create(CostQueues, backend)
    worker = Worker(CostQueues, backend, concurrency=concurrency, plain_handlers=where)
    worker.register(Noop, noop)
    running = asyncio.create_task(worker.run())
    try:
        warm = await _drain(worker, producer, concurrency)
        return warm, await _drain(worker, producer, jobs)
    finally:
        worker.shutdown()
        await running
        await backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=4)
    options = parser.parse_args()
    results = {}
    settings: tuple[Literal["thread", "process"], ...] = ("thread", "process")
    for where in settings:
        warm, took = asyncio.run(_measure(where, options.jobs, options.concurrency))
        results[where] = took
        print(
            f"{where:8} {options.jobs / took:9.0f} jobs/s  {took / options.jobs * 1e6:7.1f} us/job"
            f"  (warm-up of {options.concurrency}: {warm:.2f} s)"
        )
    extra = (results["process"] - results["thread"]) / options.jobs * 1e6
    print(f"a process costs {extra:.1f} us more per job (concurrency {options.concurrency})")


if __name__ == "__main__":
    main()
