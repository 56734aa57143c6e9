"""Migrating from procrastinate: the queuey side of each comparison, on PostgreSQL."""

from __future__ import annotations

import asyncio
import os

from queuey import Job, JobContext, Producer, Queue, QueueSet, RetryPolicy, Schedule, Unique, Worker
from queuey.backends.postgres import PostgresBackend

DATABASE_URL = os.environ.get(
    "QUEUEY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
SCHEMA = os.environ.get("QUEUEY_SCHEMA", "queuey")


# --8<-- [start:task]
class Tasks(QueueSet, prefix="app"):
    emails = Queue()  # queue="emails"


class SendEmail(
    Job[Tasks],
    queue=Tasks.emails,
    name="app.send_email",
    retry=RetryPolicy.exponential(max_attempts=5, base="2s"),  # RetryStrategy(max_attempts=4)
):
    to: str


class RefreshAccount(  # queueing_lock: at most one waiting per account
    Job[Tasks], queue=Tasks.emails, name="app.refresh", unique=Unique(by=("account",))
):
    account: int


handled: list[str] = []


def build_worker(backend: PostgresBackend) -> Worker[Tasks]:
    worker = Worker(  # procrastinate worker --queues emails --concurrency 8
        Tasks,
        backend,
        concurrency=8,
        schedules=[  # @app.periodic(cron="*/10 * * * *")
            Schedule(name="refresh-1", cron="*/10 * * * *", job=RefreshAccount(account=1))
        ],
    )

    @worker.handler(SendEmail)
    async def send_email(job: SendEmail, ctx: JobContext) -> None:  # pass_context=True
        handled.append(f"{job.to} attempt {ctx.attempt}")

    @worker.handler(RefreshAccount)
    def refresh(job: RefreshAccount, ctx: JobContext) -> None:  # sync tasks run in threads
        handled.append(f"refresh {job.account}")

    return worker


# --8<-- [end:task]


async def main() -> None:
    # --8<-- [start:defer]
    async with await PostgresBackend.connect(DATABASE_URL, schema=SCHEMA, migrate=True) as backend:
        producer = await Producer.create(Tasks, backend)
        await producer.enqueue(SendEmail(to="ada@example.com"))  # send_email.defer_async(...)
        await producer.enqueue_after(SendEmail(to="bob@example.com"), "1s")  # schedule_in
        first = await producer.enqueue(RefreshAccount(account=7))
        second = await producer.enqueue(RefreshAccount(account=7))  # AlreadyEnqueued, as a value
        assert first.inserted and not second.inserted
        cancelled = await producer.enqueue(SendEmail(to="nobody@example.com"))
        await producer.cancel(cancelled)  # job_manager.cancel_job_by_id_async(id)
        # --8<-- [end:defer]
        worker = build_worker(backend)
        task = asyncio.create_task(worker.run())
        while len(handled) < 3:
            await asyncio.sleep(0.05)
        worker.shutdown()
        await task
    print(sorted(handled))
    assert sorted(handled) == [
        "ada@example.com attempt 1",
        "bob@example.com attempt 1",
        "refresh 7",
    ]


if __name__ == "__main__":
    asyncio.run(main())
