"""``python -m bench.quorum [JOBS] [ROUNDS]``: quorum queues against classic queues on one
RabbitMQ cluster, in one run.

Starts a three-node cluster of its own with ``scripts/rabbitmq-cluster`` (AMQP on 127.0.0.1:5721
to 5723, data under ``/tmp/queuey-bench-cluster``; stopped at the end) unless
``BENCH_CLUSTER_URLS`` names a running one (space-separated URLs, node 1 first). Every round
measures both queue types, in alternating order (classic first in odd rounds, quorum first in
even ones), each in a fresh child process (``python -m bench.quorum one TYPE JOBS``) on a queue
of its own that is deleted afterwards:

- ``enqueue_bulk``: ``JOBS`` no-op jobs in one ``enqueue_many`` (persistent, confirmed), timed;
- ``drain``: one ``Worker`` (prefetch 256, async no-op handler) drains them; timed from
  ``worker.run()`` to the handler's last call.

Both connect through node 1 (the URL list starts with it), so the classic queue lives on node 1
and the quorum queue's leader is on node 1 too (RabbitMQ's ``client-local`` placement), with
followers on nodes 2 and 3: only the queue type differs. Prints every round and the medians
with the ratio quorum / classic. Defaults: 20,000 jobs, 3 rounds.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "rabbitmq-cluster"
CLUSTER_ENV = {
    "QUEUEY_CLUSTER_BASE_PORT": "5720",
    "QUEUEY_CLUSTER_DIR": "/tmp/queuey-bench-cluster",
}
TYPES = ("classic", "quorum")
PREFETCH = 256


async def one(queue_type: str, jobs: int, urls: list[str]) -> dict[str, Any]:
    """Enqueue ``jobs`` in bulk on a fresh queue of ``queue_type``, drain it with one worker;
    ``{"enqueue_bulk": jobs/s, "drain": jobs/s}``."""
    from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
    from queuey._runtime.heap import freeze_heap
    from queuey.backends.rabbitmq import RabbitMqBackend, RabbitMqOptions

    prefix = f"benchq_{queue_type}_{uuid.uuid4().hex[:6]}"

    class Queues(QueueSet, prefix=prefix):
        noop = Queue(prefetch=PREFETCH, max_priority=0)

    class Noop(Job[Queues], queue=Queues.noop, name=f"{prefix}.Noop"):
        n: int

    options = RabbitMqOptions(queue_type=queue_type)  # type: ignore[arg-type]
    handled = 0
    last = 0.0
    finished = asyncio.Event()
    async with RabbitMqBackend(urls, options) as backend:
        producer = await Producer.create(Queues, backend)
        started = time.perf_counter()
        await producer.enqueue_many([Noop(n=n) for n in range(jobs)])
        enqueue_s = time.perf_counter() - started
        leader = await asyncio.to_thread(_leader, Queues.noop.name)
        worker: Worker[Any] = Worker(Queues, backend)

        @worker.handler(Noop)
        async def noop(job: Noop, ctx: JobContext) -> None:
            nonlocal handled, last
            handled += 1
            if handled == jobs:
                last = time.perf_counter()
                finished.set()

        freeze_heap()
        started = time.perf_counter()
        running = asyncio.create_task(worker.run())
        async with asyncio.timeout(600):
            await finished.wait()
        drain_s = last - started
        worker.shutdown()
        await running
    await _delete(urls[0], Queues.noop.name)
    return {"enqueue_bulk": jobs / enqueue_s, "drain": jobs / drain_s, "node": leader}


def _leader(name: str) -> str:
    """The node holding queue ``name`` (a classic queue's node, a quorum queue's leader), as
    node 1 of the bench cluster reports it; "?" for a cluster started elsewhere."""
    try:
        listing = _cluster("ctl", "1", "-q", "list_queues", "name", "type", "leader", "pid")
    except RuntimeError:
        return "?"
    for line in listing.splitlines():
        fields = line.split("\t")
        if fields[0] == name:
            return " ".join(fields[1:])
    return "?"


async def _delete(url: str, name: str) -> None:
    import aio_pika

    async with await aio_pika.connect(url) as connection:
        channel = await connection.channel()
        for queue in (name, f"{name}.dead"):
            await channel.queue_delete(queue)


def _cluster(action: str, *args: str) -> str:
    done = subprocess.run(
        [str(SCRIPT), action, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, **CLUSTER_ENV},
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/rabbitmq-cluster {action}: {done.stderr.strip()}")
    return done.stdout


def _measure(queue_type: str, jobs: int, urls: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.quorum", "one", queue_type, str(jobs), *urls],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{queue_type}: exit {done.returncode}\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(jobs: int, rounds: int, urls: list[str]) -> None:
    """Measure ``rounds`` interleaved rounds and print them, then the medians."""
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}", flush=True)
    seen: dict[str, dict[str, list[float]]] = {t: {"enqueue_bulk": [], "drain": []} for t in TYPES}
    for r in range(rounds):
        for queue_type in TYPES if r % 2 == 0 else reversed(TYPES):
            result = _measure(queue_type, jobs, urls)
            for name, values in seen[queue_type].items():
                values.append(result[name])
            print(f"round {r + 1} {queue_type:8} {json.dumps(result)}", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    print(f"{'measurement':14} {'classic':>28} {'quorum':>28} {'quorum/classic':>15}")
    for name in ("drain", "enqueue_bulk"):
        cells = []
        for queue_type in TYPES:
            values = seen[queue_type][name]
            cells.append(
                f"{statistics.median(values):,.0f} [{min(values):,.0f}-{max(values):,.0f}]"
            )
        ratio = statistics.median(seen["quorum"][name]) / statistics.median(seen["classic"][name])
        print(f"{name:14} {cells[0]:>28} {cells[1]:>28} {ratio:>14.2f}x")


def main(argv: list[str]) -> int:
    """``[JOBS] [ROUNDS]``, or ``one TYPE JOBS URL...`` (a child's single measurement)."""
    if argv[:1] == ["one"]:
        print(json.dumps(asyncio.run(one(argv[1], int(argv[2]), argv[3:]))))
        return 0
    jobs = int(argv[0]) if argv else 20_000
    rounds = int(argv[1]) if len(argv) > 1 else 3
    given = os.environ.get("BENCH_CLUSTER_URLS")
    if given:
        run(jobs, rounds, given.split())
        return 0
    out = _cluster("start")
    try:
        exported = shlex.split(out.strip().splitlines()[-1].removeprefix("export "))[0]
        run(jobs, rounds, exported.split("=", 1)[1].split())
    finally:
        _cluster("stop")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
