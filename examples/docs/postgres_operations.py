"""How-to: operate a PostgreSQL queue from Python: migrate, size retention and leases, find the
failed jobs, retry them (``queuey db migrate``, ``queuey status`` and ``queuey failed`` do the
same from the shell)."""

from __future__ import annotations

import asyncio
import os

from queuey import Fatal, Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import Admin, PostgresBackend, migrate

DATABASE_URL = os.environ.get(
    "QUEUEY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
SCHEMA = os.environ.get("QUEUEY_SCHEMA", "queuey")


class Imports(QueueSet, prefix="imports"):
    files = Queue()


class ImportFile(Job[Imports], queue=Imports.files, name="imports.ImportFile"):
    path: str


async def drain(backend: PostgresBackend, fixed: bool) -> None:
    """Run a worker until the queue is empty (``queuey worker`` runs until SIGTERM)."""
    worker = Worker(Imports, backend)

    @worker.handler(ImportFile)
    async def import_file(job: ImportFile, ctx: JobContext) -> None:
        if not fixed:
            raise Fatal(f"{job.path}: unsupported encoding")  # failed at once, kept for a person

    task = asyncio.create_task(worker.run())
    while await backend.count_pending("imports.files"):
        await asyncio.sleep(0.05)
    worker.shutdown()
    await task


async def main() -> None:
    # --8<-- [start:migrate]
    applied = await migrate(DATABASE_URL, schema=SCHEMA)  # queuey db migrate --schema ...
    print(applied)  # the migrations applied now: all of them the first time, then []
    # --8<-- [end:migrate]
    # --8<-- [start:backend]
    backend = PostgresBackend(
        DATABASE_URL,
        schema=SCHEMA,
        retain="7d",  # done rows are deleted after a week (None keeps them); failed rows stay
        lease="2m",  # a dead worker's jobs run elsewhere 2 minutes after its last heartbeat
        max_redeliveries=3,  # a job whose worker died 3 times ends failed
        poll_interval="5s",  # the safety net when a NOTIFY is missed
    )
    # --8<-- [end:backend]
    async with backend:
        producer = await Producer.create(Imports, backend)
        await producer.enqueue(ImportFile(path="customers.csv"))
        await drain(backend, fixed=False)

        # --8<-- [start:failed]
        admin = Admin(DATABASE_URL, schema=SCHEMA)
        for queue in await admin.status():  # queuey status
            print(queue.queue, queue.pending, queue.scheduled, queue.running, queue.failed)
        [failed] = await admin.failed(queue="imports.files")  # queuey failed list --queue ...
        print(failed.id, failed.attempts, failed.error)  # ... 1 fatal error: customers.csv: ...
        await admin.retry(failed.id)  # queuey failed retry ID: due now, attempts from 0
        # --8<-- [end:failed]
        assert failed.error == "fatal error: customers.csv: unsupported encoding"
        await drain(backend, fixed=True)
        info = await admin.job(failed.id)
        assert info is not None and info.state == "done"
        assert await admin.failed(queue="imports.files") == []


if __name__ == "__main__":
    asyncio.run(main())
