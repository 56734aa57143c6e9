"""A FastAPI app whose endpoint writes a user and enqueues their welcome job in one psycopg
transaction of its own (the outbox pattern with the async ``Producer``).

Run it with ``uvicorn app:app`` (``QUEUEY_DATABASE_URL`` and ``QUEUEY_SCHEMA`` set, the schema
migrated with ``queuey db migrate``), and a worker with ``queuey worker app:build_worker``.
``POST /signups?email=a@b.c`` answers 201 with the user and job ids; with ``&fail=1`` the
transaction rolls back after both writes, and neither the user nor the job is kept.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, HTTPException, Request
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from queuey import Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend

DATABASE_URL = os.environ.get("QUEUEY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/app")
SCHEMA = os.environ.get("QUEUEY_SCHEMA", "queuey")
USERS = sql.Identifier(SCHEMA, "users")


class Signups(QueueSet, prefix="signups"):
    welcome = Queue()


class Welcome(Job[Signups], queue=Signups.welcome, name="signups.Welcome"):
    user_id: int


@dataclass
class Services:
    """What the endpoint uses: the app's own pool and the producer."""

    pool: AsyncConnectionPool
    producer: Producer[Signups]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the pool, the queuey backend and the users table; close them at shutdown."""
    async with (
        AsyncConnectionPool(DATABASE_URL, min_size=1, max_size=4, open=False) as pool,
        await PostgresBackend.connect(DATABASE_URL, schema=SCHEMA) as backend,
    ):
        async with pool.connection() as conn:
            statement = "CREATE TABLE IF NOT EXISTS {} (id serial PRIMARY KEY, email text)"
            await conn.execute(sql.SQL(statement).format(USERS))
        app.state.services = Services(pool, await Producer.create(Signups, backend))
        yield


app = FastAPI(lifespan=lifespan)


@app.post("/signups", status_code=201)
async def sign_up(request: Request, email: str, fail: bool = False) -> dict[str, object]:
    """Write the user and enqueue their welcome, all or nothing."""
    services: Services = request.app.state.services
    try:
        async with services.pool.connection() as conn, conn.transaction():
            insert = sql.SQL("INSERT INTO {} (email) VALUES (%s) RETURNING id").format(USERS)
            cursor = await conn.execute(insert, (email,))
            row = await cursor.fetchone()
            assert row is not None
            user_id = int(row[0])
            job_id = await services.producer.enqueue(Welcome(user_id=user_id), connection=conn)
            if fail:
                raise RuntimeError("something failed after both writes")
    except RuntimeError as exc:
        raise HTTPException(500, f"{exc}; nothing was kept") from None
    return {"user": user_id, "job": job_id}


async def build_worker() -> Worker[Signups]:
    """The worker (``queuey worker app:build_worker``)."""
    backend = await PostgresBackend.connect(DATABASE_URL, schema=SCHEMA)
    worker = Worker(Signups, backend, close_backend_on_shutdown=True)

    @worker.handler(Welcome)
    async def welcome(job: Welcome, ctx: JobContext) -> None:
        print(f"welcome, user {job.user_id}", flush=True)  # send the e-mail here

    return worker
