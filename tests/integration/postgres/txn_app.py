"""A worker process for the handler-transaction crash test.

Usage: ``python -m tests.integration.postgres.txn_app URL SCHEMA MODE``. The handler of
``Write`` inserts its ``n`` into ``<schema>.writes`` inside ``ctx.transaction()``; with MODE
``hang`` it then prints ``wrote <n>`` and sleeps before the transaction can commit (the test
SIGKILLs it there), with ``commit`` it commits at once. It prints ``ready`` once running.
"""

from __future__ import annotations

import asyncio
import sys

from psycopg import sql

from queuey import Job, JobContext, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.cli import run_until_signal


class TxnQueues(QueueSet, prefix="txn"):
    work = Queue(prefetch=1)


class Write(Job[TxnQueues], queue=TxnQueues.work, name="txn.Write"):
    n: int


async def main(url: str, schema: str, mode: str) -> None:
    backend = await PostgresBackend.connect(url, schema=schema, lease="1s", poll_interval="200ms")
    insert = sql.SQL("INSERT INTO {} (n) VALUES (%s)").format(sql.Identifier(schema, "writes"))
    worker = Worker(TxnQueues, backend, close_backend_on_shutdown=True)

    @worker.handler(Write)
    async def write(job: Write, ctx: JobContext) -> None:
        async with ctx.transaction() as conn:
            await conn.execute(insert, (job.n,))
            print(f"wrote {job.n} attempt {ctx.attempt}", flush=True)
            if mode == "hang":
                await asyncio.sleep(60)  # killed here: neither the write nor the completion

    print("ready", flush=True)
    await run_until_signal(worker.run, worker.shutdown)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
