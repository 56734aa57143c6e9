"""Results on PostgreSQL: written by the fenced ack (a worker that lost its lease writes none,
the winner's stands), carried in its notification when small (never the loser's), awaited by
10,000 callers of one process through its one LISTEN connection, read by a late caller until
retention deletes the done row, and waited for by the blocking handle of the sync producer
(``ThreadedBackend`` over ``PostgresBackend``)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql
from pydantic import BaseModel

from queuey import (
    Job,
    JobContext,
    JobHandle,
    Producer,
    Queue,
    QueueSet,
    ResultTimeoutError,
    UnknownJobError,
    Worker,
    sync,
)
from queuey.backends.base import Delivery
from queuey.backends.postgres import PostgresBackend
from queuey.backends.postgres._acks import LostClaimError
from queuey.results import SyncJobHandle
from tests.integration.postgres.test_backend import execute, table

pytestmark = pytest.mark.postgres


class Thumb(BaseModel):
    url: str
    width: int


class ResultQueues(QueueSet, prefix="results"):
    images = Queue(prefetch=64)


class Resize(Job[ResultQueues, Thumb], queue=ResultQueues.images, name="results.Resize"):
    url: str


def thumb_json(url: str) -> str:
    return Thumb(url=url, width=1).model_dump_json()


async def stored(database_url: str, schema: str, job_id: str) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT status, result::text, attempts FROM {} WHERE id = %s")
    return await execute(database_url, query.format(table(schema)), job_id)


async def reclaim(database_url: str, schema: str, sweeper: PostgresBackend, job_id: str) -> None:
    """Expire the lease of ``job_id``'s run and sweep until the row is pending again (its
    holder's heartbeat, such as the one its LISTEN session runs on connecting, may extend the
    lease between the two)."""
    query = sql.SQL("UPDATE {} SET lease_until = now() - interval '1 second' WHERE id = %s")
    for _ in range(50):
        await execute(database_url, query.format(table(schema)), job_id)
        await sweeper.sweep()  # the lease expired: back to pending, a redelivery
        if (await stored(database_url, schema, job_id))[0][0] == "pending":
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} was not reclaimed")


async def test_a_worker_that_lost_its_lease_writes_no_result_and_the_winners_stands(
    database_url: str, pg_schema: str
) -> None:
    loser = PostgresBackend(database_url, schema=pg_schema)
    winner = PostgresBackend(database_url, schema=pg_schema)
    async with loser, winner:
        producer = await Producer.create(ResultQueues, winner)
        config = ResultQueues.images.config
        for late_first in (True, False):
            handle = await producer.enqueue(Resize(url="x"))
            lost_consumer = loser.consumer(config)
            lost = await lost_consumer.next()
            assert lost is not None and lost.envelope.job_id == handle.job_id
            await lost_consumer.stop()  # it must not claim the redelivery (the winner's)
            await reclaim(database_url, pg_schema, winner, handle.job_id)
            won_consumer = winner.consumer(config)
            won = await won_consumer.next()
            assert won is not None and won.envelope.job_id == handle.job_id
            if late_first:  # the loser's late ack comes before the winner's
                with pytest.raises(LostClaimError):
                    await lost.ack(thumb_json("loser"))
                assert (await stored(database_url, pg_schema, handle.job_id))[0][:2] == (
                    "running",
                    None,
                )
                await won.ack(thumb_json("winner"))
            else:  # or after it
                await won.ack(thumb_json("winner"))
                with pytest.raises(LostClaimError):
                    await lost.ack(thumb_json("loser"))
            assert await stored(database_url, pg_schema, handle.job_id) == [
                ("done", thumb_json("winner"), 2)
            ]
            assert await handle.result(timeout=10) == Thumb(url="winner", width=1)
            await won_consumer.stop()


async def test_the_fenced_ack_carries_a_small_result_in_its_notification_and_only_its_own(
    database_url: str, pg_schema: str
) -> None:
    loser = PostgresBackend(database_url, schema=pg_schema)
    winner = PostgresBackend(database_url, schema=pg_schema)
    listening = await psycopg.AsyncConnection.connect(database_url, autocommit=True)
    async with listening, loser, winner:
        await listening.execute(sql.SQL("LISTEN {}").format(sql.Identifier(winner.results_channel)))
        producer = await Producer.create(ResultQueues, winner)
        config = ResultQueues.images.config
        results = [
            thumb_json("winner"),
            thumb_json("b" * 6900),  # at most 7,000 bytes: carried in the notification
            thumb_json("é" * 3500),  # 3,500 characters but over 7,000 bytes: by its id alone
            thumb_json("again"),  # a row holding an earlier error: read back
        ]
        small = await producer.enqueue(Resize(url="s"))
        lost_consumer, won_consumer = loser.consumer(config), winner.consumer(config)
        lost = await lost_consumer.next()
        assert lost is not None and lost.envelope.job_id == small.job_id
        await lost_consumer.stop()  # claims nothing more (its delivery can still be acked)
        await reclaim(database_url, pg_schema, winner, small.job_id)
        won = await won_consumer.next()
        assert won is not None and won.envelope.job_id == small.job_id
        waiting = [asyncio.create_task(small.result(timeout=30))]
        with pytest.raises(LostClaimError):
            await lost.ack(thumb_json("loser"))
        await won.ack(results[0])  # (a redelivered row runs alone: nothing else is claimed)
        big, wide, retried = [await producer.enqueue(Resize(url=n)) for n in "bwr"]
        waiting += [asyncio.create_task(h.result(timeout=30)) for h in (big, wide, retried)]
        claimed: dict[str, Delivery] = {}
        while len(claimed) < 3:
            delivery = await asyncio.wait_for(won_consumer.next(), 10)
            assert delivery is not None
            claimed[delivery.envelope.job_id] = delivery
        query = sql.SQL("UPDATE {} SET error = 'boom' WHERE id = %s").format(table(pg_schema))
        await execute(database_url, query, retried.job_id)  # as an earlier failed attempt left it
        for handle, result in zip((big, wide, retried), results[1:], strict=True):
            await claimed[handle.job_id].ack(result)
        payloads = [note.payload async for note in listening.notifies(timeout=2.0)]
        # The loser's result is never announced; the winner's is, by its id alone: the
        # redelivered row holds the error its lost run left, as the retried row does.
        assert payloads == [small.job_id, f"{big.job_id} {results[1]}", wide.job_id, retried.job_id]
        got = await asyncio.gather(*waiting)
        assert [thumb.model_dump_json() for thumb in got] == results
        for handle, result in zip((small, big, wide, retried), results, strict=True):
            assert (await stored(database_url, pg_schema, handle.job_id))[0][1] == result
        await won_consumer.stop()


async def test_ten_thousand_awaiters_share_one_listen_connection(
    database_url: str, pg_schema: str
) -> None:
    count = 10_000
    awaiting = PostgresBackend(database_url, schema=pg_schema, pool_size=4)
    working = PostgresBackend(database_url, schema=pg_schema)
    async with awaiting, working:
        producer = await Producer.create(ResultQueues, awaiting)
        handles = await producer.enqueue_many([Resize(url=str(n)) for n in range(count)])
        assert all(isinstance(handle, JobHandle) for handle in handles)
        waiters = [
            asyncio.create_task(handle.result(timeout=240))  # type: ignore[attr-defined]
            for handle in handles
        ]
        seen: list[tuple[int, int]] = []
        watching = asyncio.create_task(watch_connections(database_url, awaiting.owner, seen))
        await asyncio.sleep(1.0)  # every waiter has read its job (pending) and waits
        assert not any(waiter.done() for waiter in waiters)
        worker = Worker(ResultQueues, working, concurrency=64)

        @worker.handler(Resize)
        async def resize(job: Resize, ctx: JobContext) -> Thumb:
            return Thumb(url=job.url + "!", width=len(job.url))

        running = asyncio.create_task(worker.run())
        try:
            results = await asyncio.wait_for(asyncio.gather(*waiters), 240)
        finally:
            worker.shutdown()
            await running
            watching.cancel()
        assert [thumb.url for thumb in results] == [f"{n}!" for n in range(count)]
        assert seen, "pg_stat_activity was never read"
        listens = max(listen for listen, _ in seen)
        total = max(every for _, every in seen)
        assert listens == 1, seen
        assert total <= 4 + 1, seen  # the pool (4) and the one LISTEN session, never per waiter
        assert awaiting.listener is not None


async def watch_connections(url: str, owner: str, seen: list[tuple[int, int]]) -> None:
    """Every 0.2 s: (LISTEN sessions, all sessions) of the backend ``owner`` on the server."""
    query = (
        "SELECT count(*) FILTER (WHERE application_name LIKE 'queuey-listen %%'), count(*) "
        "FROM pg_stat_activity WHERE application_name LIKE %s"
    )
    while True:
        rows = await execute(url, query, f"%{owner}%")
        seen.append((int(rows[0][0]), int(rows[0][1])))
        await asyncio.sleep(0.2)


async def test_a_result_is_read_after_the_job_ended_until_retention_deletes_it(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema, retain="1s") as backend:
        producer = await Producer.create(ResultQueues, backend)
        handle = await producer.enqueue(Resize(url="late"))
        worker = Worker(ResultQueues, backend)

        @worker.handler(Resize)
        async def resize(job: Resize, ctx: JobContext) -> Thumb:
            return Thumb(url=job.url, width=7)

        running = asyncio.create_task(worker.run())
        await handle.result(timeout=30)
        worker.shutdown()
        await running
        # A caller that starts waiting after the job ended (here, with only the id) reads it
        # at once: no notification will come.
        later = await producer.result(handle.job_id, Thumb, timeout=0.5)
        assert later == Thumb(url="late", width=7)
        await asyncio.sleep(1.5)
        assert await backend.prune() == 1
        with pytest.raises(UnknownJobError):
            await producer.result(handle.job_id, Thumb, timeout=5)
        with pytest.raises(UnknownJobError):
            await producer.result(str(uuid.uuid4()), Thumb)


async def test_the_sync_producers_handle_blocks_until_the_result_over_postgres(
    database_url: str, pg_schema: str
) -> None:
    threaded = sync.ThreadedBackend(PostgresBackend(database_url, schema=pg_schema))
    await asyncio.to_thread(threaded.open)
    try:
        producer = await asyncio.to_thread(sync.Producer.create, ResultQueues, threaded)
        handle = await asyncio.to_thread(producer.enqueue, Resize(url="sync"))
        assert isinstance(handle, SyncJobHandle)
        with pytest.raises(ResultTimeoutError):
            await asyncio.to_thread(handle.result, timeout=0.3)  # not run yet: left alone
        waiting = asyncio.create_task(asyncio.to_thread(handle.result, timeout=30))
        ran: list[str] = []
        async with PostgresBackend(database_url, schema=pg_schema) as working:
            worker = Worker(ResultQueues, working)

            @worker.handler(Resize)
            async def resize(job: Resize, ctx: JobContext) -> Thumb:
                ran.append(job.url)
                return Thumb(url=job.url, width=3)

            running = asyncio.create_task(worker.run())
            try:
                assert await asyncio.wait_for(waiting, 60) == Thumb(url="sync", width=3)
            finally:
                worker.shutdown()
                await running
        assert ran == ["sync"]
        later = await asyncio.to_thread(producer.result, handle.job_id, Thumb, timeout=1)
        assert later == Thumb(url="sync", width=3)
    finally:
        await asyncio.to_thread(threaded.close)
