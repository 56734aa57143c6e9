"""``queuey worker tests.acceptance.worker_hostile:build``: a handler whose error carries the
terminal control sequences of its job's ``text`` (the terminal-text tests)."""

from __future__ import annotations

import os

from queuey import Fatal, Job, JobContext, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend


class HostileQueues(QueueSet, prefix="hostile"):
    work = Queue()


class Echo(Job[HostileQueues], queue=HostileQueues.work, name="hostile.Echo"):
    text: str


async def build() -> Worker[HostileQueues]:
    backend = await PostgresBackend.connect(
        os.environ["QUEUEY_DATABASE_URL"], schema=os.environ["QUEUEY_SCHEMA"]
    )
    worker = Worker(HostileQueues, backend, close_backend_on_shutdown=True)

    @worker.handler(Echo)
    async def echo(job: Echo, ctx: JobContext) -> None:
        raise Fatal(f"refused: {job.text}")

    return worker
