"""The worker of the example shop: ``queuey worker shop.worker:build`` (with
``QUEUEY_DATABASE_URL`` and ``QUEUEY_SCHEMA`` set, and this folder on ``PYTHONPATH``).

It needs no Django: the handler marks the order's receipt as sent inside ``ctx.transaction()``,
so that write and the job's completion commit together (a crash in between leaves neither, and
the job runs again).
"""

from __future__ import annotations

import os

from psycopg import sql

from queuey import JobContext, Worker
from queuey.backends.postgres import PostgresBackend
from shop.jobs import SendReceipt, ShopQueues


async def build() -> Worker[ShopQueues]:
    """The worker, on the database and schema of the Django settings' environment."""
    url = os.environ.get("QUEUEY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/shop")
    schema = os.environ.get("QUEUEY_SCHEMA", "queuey")
    backend = await PostgresBackend.connect(url, schema=schema)
    worker = Worker(ShopQueues, backend, close_backend_on_shutdown=True)
    mark_sent = sql.SQL("UPDATE {} SET receipt_sent = true WHERE id = %s").format(
        sql.Identifier(schema, "orders_order")
    )

    @worker.handler(SendReceipt)
    async def send_receipt(job: SendReceipt, ctx: JobContext) -> None:
        # ... send the e-mail here (at least once: it may be sent again after a crash) ...
        async with ctx.transaction() as conn:
            await conn.execute(mark_sent, (job.order_id,))

    return worker
