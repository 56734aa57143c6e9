"""How-to: enqueue inside your own psycopg transaction (the outbox pattern), async and sync."""

from __future__ import annotations

import asyncio
import os

import psycopg
from psycopg import sql

from queuey import Job, Producer, Queue, QueueSet, sync
from queuey.backends.postgres import PostgresBackend

DATABASE_URL = os.environ.get(
    "QUEUEY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
SCHEMA = os.environ.get("QUEUEY_SCHEMA", "queuey")
ORDERS = sql.Identifier(SCHEMA, "orders")


class Shop(QueueSet, prefix="shop"):
    receipts = Queue()


class SendReceipt(Job[Shop], queue=Shop.receipts, name="shop.SendReceipt"):
    order_id: int


class PaymentDeclinedError(Exception):
    """A failure after both writes: neither is kept."""


# --8<-- [start:async]
async def place_order(producer: Producer[Shop], item: str, decline: bool = False) -> int:
    async with await psycopg.AsyncConnection.connect(DATABASE_URL) as conn, conn.transaction():
        insert = sql.SQL("INSERT INTO {} (item) VALUES (%s) RETURNING id").format(ORDERS)
        row = await (await conn.execute(insert, (item,))).fetchone()
        assert row is not None
        await producer.enqueue(SendReceipt(order_id=row[0]), connection=conn)
        if decline:
            raise PaymentDeclinedError(item)  # rolls back the order and its job
        return int(row[0])


# --8<-- [end:async]


# --8<-- [start:sync]
def place_order_sync(producer: sync.Producer[Shop], item: str) -> int:
    with psycopg.connect(DATABASE_URL) as conn, conn.transaction():  # no event loop needed
        insert = sql.SQL("INSERT INTO {} (item) VALUES (%s) RETURNING id").format(ORDERS)
        row = conn.execute(insert, (item,)).fetchone()
        assert row is not None
        producer.enqueue(SendReceipt(order_id=row[0]), connection=conn)
        return int(row[0])


# --8<-- [end:sync]


async def main() -> None:
    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        create = "CREATE TABLE IF NOT EXISTS {} (id serial PRIMARY KEY, item text)"
        conn.execute(sql.SQL(create).format(ORDERS))
    async with await PostgresBackend.connect(DATABASE_URL, schema=SCHEMA, migrate=True) as backend:
        producer = await Producer.create(Shop, backend)
        kept = await place_order(producer, "book")
        try:
            await place_order(producer, "lamp", decline=True)
        except PaymentDeclinedError:
            pass
        assert await backend.count_pending("shop.receipts") == 1  # only the kept order's job
    # --8<-- [start:sync-backend]
    with sync.PostgresBackend.connect(DATABASE_URL, schema=SCHEMA) as sync_backend:
        sync_producer = sync.Producer.create(Shop, sync_backend)
        also_kept = await asyncio.to_thread(place_order_sync, sync_producer, "pen")
    # --8<-- [end:sync-backend]
    print(kept, also_kept)


if __name__ == "__main__":
    asyncio.run(main())
