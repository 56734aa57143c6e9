"""The app of the flow-limit proofs (``bench.flow_proofs``), run by ``queuey worker
bench.flow_app:make_worker --processes N``.

One queue, ``flowproof.work``, and one job type, ``flowproof.Work`` (a ``tenant`` field), whose
limits come from the environment at import, so every worker process declares the same ones:

- ``FLOWPROOF_JOB_LIMITS`` / ``FLOWPROOF_QUEUE_LIMITS``: ``;``-separated limits of the job type /
  the whole queue, each ``rate:LIMIT:PER:BURST`` (by tenant), ``rate-all:LIMIT:PER:BURST`` (one
  key) or ``cap:LIMIT`` (by tenant);
- ``FLOWPROOF_SCHEMA``, ``FLOWPROOF_RECORDS`` (a directory), ``FLOWPROOF_SLEEP`` (seconds a
  run takes), ``FLOWPROOF_LEASE``, ``FLOWPROOF_CONCURRENCY``, ``FLOWPROOF_PREFETCH``,
  ``BENCH_DATABASE_URL``.

Each handler appends ``S job_id tenant start_epoch enqueued_ms`` when it starts and ``E job_id
tenant end_epoch`` when it ends to ``FLOWPROOF_RECORDS/<pid>.log`` with one ``os.write`` each
(kept by the kernel when the process is killed with SIGKILL).
"""

from __future__ import annotations

import asyncio
import os
import time

from bench.systems._env import DATABASE_URL
from queuey import Concurrency, Job, JobContext, Queue, QueueSet, RateLimit, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.limits import FlowLimit


def parse_limits(text: str) -> list[FlowLimit]:
    """``rate:5:1:1;cap:3`` as ``[RateLimit(5, per=1, by="tenant", burst=1), Concurrency(3,
    by="tenant")]``; ``rate-all:...`` is a rate limit of one key."""
    limits: list[FlowLimit] = []
    for item in filter(None, text.split(";")):
        kind, *values = item.split(":")
        if kind == "cap":
            limits.append(Concurrency(int(values[0]), by="tenant"))
        else:
            by = () if kind == "rate-all" else ("tenant",)
            limit, per, burst = int(values[0]), float(values[1]), int(values[2])
            limits.append(RateLimit(limit, per=per, by=by, burst=burst))
    return limits


class ProofQueues(QueueSet, prefix="flowproof"):
    work = Queue(
        prefetch=int(os.environ.get("FLOWPROOF_PREFETCH", "32")),
        limits=parse_limits(os.environ.get("FLOWPROOF_QUEUE_LIMITS", "")),
    )


class Work(Job[ProofQueues], queue=ProofQueues.work, name="flowproof.Work",
           limits=parse_limits(os.environ.get("FLOWPROOF_JOB_LIMITS", ""))):  # fmt: skip
    tenant: str


def make_worker() -> Worker[ProofQueues]:
    """One worker process: its handler writes its start and end records."""
    backend = PostgresBackend(
        DATABASE_URL,
        schema=os.environ["FLOWPROOF_SCHEMA"],
        lease=float(os.environ.get("FLOWPROOF_LEASE", "5")),
        poll_interval="1s",
    )
    concurrency = int(os.environ.get("FLOWPROOF_CONCURRENCY", "32"))
    worker = Worker(ProofQueues, backend, concurrency=concurrency)
    path = os.path.join(os.environ["FLOWPROOF_RECORDS"], f"{os.getpid()}.log")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    sleep = float(os.environ.get("FLOWPROOF_SLEEP", "0"))

    @worker.handler(Work)
    async def work(job: Work, ctx: JobContext) -> None:
        start = f"S {ctx.job_id} {job.tenant} {time.time():.6f} {ctx.enqueued_at_ms}\n"
        os.write(fd, start.encode())
        if sleep:
            await asyncio.sleep(sleep)
        os.write(fd, f"E {ctx.job_id} {job.tenant} {time.time():.6f}\n".encode())

    return worker
