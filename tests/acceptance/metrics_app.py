"""A worker for the metrics test: each job ends as its ``plan`` says, so the test knows the
exact mix of outcomes the worker's ``/metrics`` must show.

``build`` reads the database URL and schema from the environment; its ``Metrics`` reads the
queue depths every 0.2 s (``queuey worker --http-port`` keeps a worker's own ``Metrics``).
"""

from __future__ import annotations

import os

from queuey import Defer, Fatal, Job, JobContext, Queue, QueueSet, RetryPolicy, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.observability import Metrics


class ObsQueues(QueueSet, prefix="obs"):
    work = Queue(prefetch=4, retry=RetryPolicy.fixed(3, "100ms"))


class Planned(Job[ObsQueues], queue=ObsQueues.work, name="obs.Planned"):
    plan: str  # "ok", "retry_once", "defer_once" or "dead"


async def handle(job: Planned, ctx: JobContext) -> None:
    if job.plan == "retry_once" and ctx.attempt == 1:
        raise RuntimeError("first run fails")
    if job.plan == "defer_once" and ctx.deferrals == 0:
        raise Defer("100ms")
    if job.plan == "dead":
        raise Fatal("never")


async def build() -> Worker[ObsQueues]:
    backend = await PostgresBackend.connect(
        os.environ["QUEUEY_DATABASE_URL"], schema=os.environ["QUEUEY_SCHEMA"], poll_interval="200ms"
    )
    worker = Worker(
        ObsQueues, backend, close_backend_on_shutdown=True, metrics=Metrics(depth_interval=0.2)
    )
    worker.register(Planned, handle)
    return worker
