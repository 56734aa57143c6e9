"""The processes of the PostgreSQL failover test, each writing its own records to a file.

- ``queuey worker tests.integration.cluster.failover_app:build``: a worker on the schema
  ``QUEUEY_TEST_SCHEMA`` of ``QUEUEY_DATABASE_URL`` (the multi-host URL) polling only every
  ``POLL`` (so a job picked up at once was woken through LISTEN), writing ``run <job id> <time>``
  when its handler runs a job and ``settled <job id> <time>`` once the job's success is
  recorded in the database (``on_settled``), to ``QUEUEY_TEST_RECORDS``.
- ``python -m tests.integration.cluster.failover_app produce``: enqueues ``Task`` jobs one at a
  time until SIGTERM, writing ``ok <job id> <time>`` for each enqueue that returned and
  ``fail <n> <time> <error>`` for each that raised.

Times are ``time.time()`` (comparable across processes). Every line is flushed at once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import IO

from queuey import BackendError, Envelope, Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend

POLL = "20s"
LEASE = "4s"
HANDLER_S = 0.01


class FailoverQueues(QueueSet, prefix="failover"):
    work = Queue(max_priority=0, prefetch=16)


class Task(Job[FailoverQueues], queue=FailoverQueues.work, name="failover.Task"):
    n: int


def _records() -> IO[str]:
    return open(os.environ["QUEUEY_TEST_RECORDS"], "a", buffering=1)


def _backend() -> PostgresBackend:
    url, schema = os.environ["QUEUEY_DATABASE_URL"], os.environ["QUEUEY_TEST_SCHEMA"]
    return PostgresBackend(url, schema=schema, poll_interval=POLL, lease=LEASE)


def build() -> Worker[FailoverQueues]:
    """The worker of one process."""
    out = _records()

    def settled(envelope: Envelope, kind: str, text: str) -> None:
        if kind == "succeeded":
            out.write(f"settled {envelope.job_id} {time.time()}\n")

    worker = Worker(FailoverQueues, _backend(), on_settled=settled)

    @worker.handler(Task)
    async def handle(job: Task, ctx: JobContext) -> None:
        out.write(f"run {ctx.job_id} {time.time()}\n")
        await asyncio.sleep(HANDLER_S)

    return worker


async def produce() -> None:
    """Enqueue until SIGTERM, one job at a time, recording each outcome."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    out = _records()
    async with _backend() as backend:
        producer = await Producer.create(FailoverQueues, backend)
        n = 0
        while not stop.is_set():
            try:
                job_id = await producer.enqueue(Task(n=n))
            except BackendError as exc:  # the primary is gone: said, then tried again
                out.write(f"fail {n} {time.time()} {str(exc)[:200]!r}\n")
                await asyncio.sleep(0.1)
            else:
                out.write(f"ok {job_id} {time.time()}\n")
            n += 1


if __name__ == "__main__" and sys.argv[1:] == ["produce"]:
    asyncio.run(produce())
