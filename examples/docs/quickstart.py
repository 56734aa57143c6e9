"""Getting started: enqueue and run jobs on PostgreSQL.

Reads ``QUEUEY_DATABASE_URL`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``) and
``QUEUEY_SCHEMA`` (default ``queuey``).
"""

from __future__ import annotations

import asyncio
import logging
import os

from queuey import Job, JobContext, Producer, Queue, QueueSet, Retry, RetryPolicy, Worker
from queuey.backends.postgres import PostgresBackend

DATABASE_URL = os.environ.get(
    "QUEUEY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
SCHEMA = os.environ.get("QUEUEY_SCHEMA", "queuey")


class AppQueues(QueueSet, prefix="myapp"):
    emails = Queue(prefetch=10)  # "myapp.emails"
    images = Queue(retry=RetryPolicy.exponential(max_attempts=3, base="1s", max="2m"))


class SendEmail(
    Job[AppQueues],
    queue=AppQueues.emails,
    name="myapp.SendEmail",  # its identity on the wire
    retry=RetryPolicy.exponential(max_attempts=5, base="1s"),
):
    to: str
    body: str


async def main() -> list[str]:
    sent: list[str] = []
    async with await PostgresBackend.connect(DATABASE_URL, schema=SCHEMA, migrate=True) as backend:
        producer = await Producer.create(AppQueues, backend)
        await producer.enqueue(SendEmail(to="ada@example.com", body="hi"))
        await producer.enqueue_after(SendEmail(to="grace@example.com", body="later"), "2s")

        worker = Worker(AppQueues, backend, job_timeout="5m")

        @worker.handler(SendEmail)
        async def send_email(job: SendEmail, ctx: JobContext) -> None:
            if job.to.startswith("ada") and ctx.attempt == 1:
                raise Retry("mail server busy")  # the retry policy decides: backoff, then retry
            sent.append(job.to)
            if len(sent) == 2:
                worker.shutdown()  # a real worker runs until SIGTERM (or Ctrl-C)

        await worker.run()
    return sent


if __name__ == "__main__":
    # INFO shows each outcome, naming the job: "job myapp.SendEmail 1f0e7c3a-… (myapp.emails,
    # attempt 1) failed; retry in 0.734s: mail server busy", "… (attempt 2) succeeded".
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    print(sorted(asyncio.run(main())))  # ['ada@example.com', 'grace@example.com']
