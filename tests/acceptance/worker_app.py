"""An app for ``queuey worker tests.acceptance.worker_app:build`` in the CLI tests: a factory
reading the database URL and schema from the environment."""

from __future__ import annotations

import asyncio
import os

from queuey import Job, JobContext, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend


class CliQueues(QueueSet, prefix="cli"):
    work = Queue(prefetch=4)


class Nap(Job[CliQueues], queue=CliQueues.work, name="cli.Nap"):
    seconds: float


async def build() -> Worker[CliQueues]:
    backend = await PostgresBackend.connect(
        os.environ["QUEUEY_DATABASE_URL"], schema=os.environ["QUEUEY_SCHEMA"]
    )
    worker = Worker(CliQueues, backend, close_backend_on_shutdown=True)

    @worker.handler(Nap)
    async def nap(job: Nap, ctx: JobContext) -> None:
        print(f"started {ctx.job_id}", flush=True)
        await asyncio.sleep(job.seconds)
        print(f"finished {ctx.job_id}", flush=True)

    return worker
