"""Apps for ``queuey worker`` in the CLI tests.

``build`` is the factory form (an async function returning a Worker whose backend it opened),
reading the database URL and schema from the environment. ``worker_plain`` and ``worker_memory``
hold the plain module-level form.
"""

from __future__ import annotations

import asyncio
import os

from queuey import Job, JobContext, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend


class CliQueues(QueueSet, prefix="cli"):
    work = Queue(prefetch=4)
    mail = Queue(prefetch=2)


class Nap(Job[CliQueues], queue=CliQueues.work, name="cli.Nap"):
    seconds: float


class Mail(Job[CliQueues], queue=CliQueues.mail, name="cli.Mail"):
    to: str


def add_handlers(worker: Worker[CliQueues]) -> Worker[CliQueues]:
    """Handlers that print what they do on stdout, one flushed line each."""

    @worker.handler(Nap)
    async def nap(job: Nap, ctx: JobContext) -> None:
        print(f"started {ctx.job_id}", flush=True)
        await asyncio.sleep(job.seconds)
        print(f"finished {ctx.job_id}", flush=True)

    @worker.handler(Mail)
    async def mail(job: Mail, ctx: JobContext) -> None:
        print(f"mailed {job.to}", flush=True)

    return worker


async def build() -> Worker[CliQueues]:
    backend = await PostgresBackend.connect(
        os.environ["QUEUEY_DATABASE_URL"], schema=os.environ["QUEUEY_SCHEMA"]
    )
    return add_handlers(Worker(CliQueues, backend, close_backend_on_shutdown=True))


def needs_arguments(url: str) -> Worker[CliQueues]:
    """Not a factory ``queuey worker`` can call."""
    raise AssertionError("never called")


not_a_worker = 42
