"""Batches on a real PostgreSQL: members completed concurrently by three workers (three
backends, so three connections and transactions) release the callback exactly once, checked
from the callback handler's own record; members added inside the adding handler's transaction
commit with its completion, and a rolled-back transaction adds none."""

from __future__ import annotations

import asyncio
import json
import uuid

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from queuey import (
    ConfigError,
    Job,
    JobContext,
    Producer,
    Queue,
    QueueSet,
    RetryPolicy,
    UnknownBatchError,
    Worker,
)
from queuey.backends.postgres import Admin, PostgresBackend
from queuey.batches import BatchProgress, batch
from queuey.cli import main
from tests.conftest import fresh_schema

pytestmark = pytest.mark.postgres


class Race(QueueSet, prefix="batchrace"):
    work = Queue(prefetch=32, retry=RetryPolicy.fixed(2, "10ms"))


class Member(Job[Race], queue=Race.work, name="batchrace.Member"):
    n: int
    grow: int = 0
    fail_once: bool = False


class Done(Job[Race], queue=Race.work, name="batchrace.Done"):
    progress: BatchProgress

    @classmethod
    def from_batch(cls, progress: BatchProgress) -> Done:
        return cls(progress=progress)


def _worker(backend: PostgresBackend, ran: list[int], done: list[BatchProgress]) -> Worker[Race]:
    worker = Worker(Race, backend, concurrency=16)

    @worker.handler(Member)
    async def member(job: Member, ctx: JobContext) -> None:
        assert ctx.batch_id is not None
        producer = await Producer.create(Race, backend)
        async with ctx.transaction() as conn:
            if job.grow:
                more = [Member(n=job.n * 1000 + i) for i in range(job.grow)]
                await producer.batch(ctx.batch_id).add(*more, connection=conn)
            if job.fail_once and ctx.attempt == 1:
                raise RuntimeError("rolled back: its additions with it")
        ran.append(job.n)

    @worker.handler(Done)
    async def finished(job: Done, ctx: JobContext) -> None:
        done.append(job.progress)

    return worker


async def test_concurrent_ends_release_the_callback_once(database_url: str) -> None:
    async with fresh_schema(database_url) as schema:
        backends = [
            await PostgresBackend.connect(database_url, schema=schema, poll_interval="200ms")
            for _ in range(3)
        ]
        try:
            producer = await Producer.create(Race, backends[0])
            members = [Member(n=n, grow=3 if n % 50 == 0 else 0) for n in range(1, 301)]
            members[6] = Member(n=7, grow=2, fail_once=True)
            handle = await producer.enqueue_batch(batch(*members).on_complete(Done.from_batch))
            ran: list[int] = []
            done: list[BatchProgress] = []
            workers = [_worker(b, ran, done) for b in backends]
            tasks = [asyncio.create_task(w.run()) for w in workers]
            try:
                for _ in range(600):
                    if done:
                        break
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.5)  # a second release would have run by now
            finally:
                for w in workers:
                    w.shutdown()
                await asyncio.gather(*tasks)
            total = 300 + 6 * 3 + 2  # grown by n=50..300 (3 each) and by n=7 (2, once)
            assert done == [
                BatchProgress(
                    batch_id=handle.batch_id, total=total, done=total, failed=0, pending=0
                )
            ]
            assert sorted(ran) == sorted(set(ran)) and len(ran) == total
            assert 7000 in ran and 7001 in ran and 7002 not in ran
        finally:
            for b in backends:
                await b.close()


async def test_workflows_batch_shows_progress(database_url: str, pg_schema: str) -> None:
    target = ("--database-url", database_url, "--schema", pg_schema)
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(Race, backend)
        handle = await producer.enqueue_batch(batch(Member(n=1), Member(n=2), Member(n=3)))
        assert await producer.cancel(handle.job_ids[0]) == "cancelled"
    shown = await asyncio.to_thread(
        CliRunner().invoke, main, ["workflows", "batch", handle.batch_id, "--json", *target]
    )
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == {
        "id": handle.batch_id, "total": 3, "done": 0, "failed": 1, "pending": 2, "ended": False
    }  # fmt: skip
    text = await asyncio.to_thread(
        CliRunner().invoke, main, ["workflows", "batch", handle.batch_id, *target]
    )
    assert text.stdout.strip() == (
        f"batch {handle.batch_id}  running  total 3, done 0, failed 1, pending 2"
    )
    missing = await asyncio.to_thread(
        CliRunner().invoke, main, ["workflows", "batch", str(uuid.uuid4()), *target]
    )
    assert missing.exit_code == 1 and "no batch with id" in missing.output


async def test_the_sweep_deletes_a_batch_that_ended_longer_ago_than_retain(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(
        database_url, schema=pg_schema, retain="1s", poll_interval="200ms"
    ) as backend:
        producer = await Producer.create(Race, backend)
        ended = await producer.enqueue_batch(batch(Member(n=2)))
        assert await producer.cancel(ended.job_ids[0]) == "cancelled"
        assert (await ended.progress()).ended
        worker = _worker(backend, [], [])  # its sweeps prune
        running = asyncio.create_task(worker.run())
        try:
            deadline = asyncio.get_running_loop().time() + 20
            while True:
                try:
                    await ended.progress()
                except UnknownBatchError:
                    break
                assert asyncio.get_running_loop().time() < deadline, "the ended batch was kept"
                await asyncio.sleep(0.2)
        finally:
            worker.shutdown()
            await running


async def test_an_expired_member_is_counted_failed(database_url: str, pg_schema: str) -> None:
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="200ms") as backend:
        producer = await Producer.create(Race, backend)
        handle = await producer.enqueue_batch(
            batch(Member(n=1), Member(n=2)).on_complete(Done.from_batch)
        )
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            table = sql.Identifier(pg_schema, "queue_message")
            past = sql.SQL("UPDATE {} SET expires_at = now() - interval '1 s' WHERE id = %s")
            for job_id in handle.job_ids:  # as a message TTL would, once it has passed
                await conn.execute(past.format(table), (job_id,))
        await backend.sweep()
        progress = await handle.progress()
        assert (progress.failed, progress.pending, progress.ended) == (2, 0, True)
        done: list[BatchProgress] = []
        worker = _worker(backend, [], done)
        running = asyncio.create_task(worker.run())
        try:
            for _ in range(200):
                if done:
                    break
                await asyncio.sleep(0.05)
        finally:
            worker.shutdown()
            await running
        assert [p.failed for p in done] == [2]


async def test_a_retried_member_leaves_its_batch(database_url: str, pg_schema: str) -> None:
    async with PostgresBackend(database_url, schema=pg_schema, poll_interval="200ms") as backend:
        producer = await Producer.create(Race, backend)
        handle = await producer.enqueue_batch(
            batch(Member(n=1), Member(n=2)).on_complete(Done.from_batch)
        )
        assert await producer.cancel(handle.job_ids[0]) == "cancelled"
        admin = Admin(database_url, schema=pg_schema)
        (touched,) = await admin.retry(handle.job_ids[0], status="cancelled")
        assert touched.count == 1
        shown = await admin.batch(handle.batch_id)
        assert shown is not None and (shown.total, shown.failed, shown.pending) == (2, 1, 1)
        seen: dict[int, str | None] = {}
        done: list[BatchProgress] = []
        worker = Worker(Race, backend, concurrency=4)

        @worker.handler(Member)
        async def member(job: Member, ctx: JobContext) -> None:
            seen[job.n] = ctx.batch_id

        @worker.handler(Done)
        async def finished(job: Done, ctx: JobContext) -> None:
            done.append(job.progress)

        running = asyncio.create_task(worker.run())
        try:
            for _ in range(200):
                if done and len(seen) == 2:
                    break
                await asyncio.sleep(0.05)
        finally:
            worker.shutdown()
            await running
    assert seen == {1: None, 2: handle.batch_id}  # the retried run is no member any more
    assert [(p.total, p.done, p.failed) for p in done] == [(2, 1, 1)]


async def test_a_malformed_batch_id_is_named_as_a_batch_id(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(Race, backend)
        with pytest.raises(ConfigError, match=r"'zzz' is not a batch id \(a UUID\)"):
            await producer.batch("zzz").progress()
