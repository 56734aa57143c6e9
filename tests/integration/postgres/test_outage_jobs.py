"""A PostgreSQL outage shorter than the lease costs no second run: the outcomes a worker could
not record while the database was away are kept and written once it is back, and the leases
whose heartbeats failed are renewed first, as soon as it answers.

The handlers' own records say how many times each job ran; the database says what was
recorded. Two outages: 5 s under 1,000 jobs in flight with a 30 s lease, through a TCP proxy
that is cut (private to the test) and, ``serial``, with the machine's PostgreSQL stopped; and
32 s with a 45 s lease, through the proxy only, longer than a settle's own retries on the pool
(five, each waiting up to 5 s for a connection), which used to give the outcome up."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable

import psycopg
import pytest

from queuey import Fatal, Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend
from tests.integration.postgres.outages import Outage

pytestmark = pytest.mark.postgres


class KeptQueues(QueueSet, prefix="kept"):
    work = Queue(prefetch=1000)


class Step(Job[KeptQueues], queue=KeptQueues.work, name="kept.Step"):
    n: int


async def statuses(database_url: str, schema: str) -> Counter[str]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(f'SELECT status FROM "{schema}".queue_message')
        return Counter(str(status) for (status,) in await cursor.fetchall())


async def lease_left(database_url: str, schema: str) -> list[float]:
    """Seconds left on the lease of each running row (database clock)."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT extract(epoch FROM lease_until - now())::float8 "
            f"FROM \"{schema}\".queue_message WHERE status = 'running'"
        )
        return [float(left) for (left,) in await cursor.fetchall()]


async def until(check: Callable[[], Awaitable[bool] | bool], timeout: float, what: str) -> None:
    """Return once ``check()`` (awaited if it must be) is true; fail after ``timeout``."""
    try:
        async with asyncio.timeout(timeout):
            while not await _value(check()):
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"not within {timeout}s: {what}") from None


async def _value(result: Awaitable[bool] | bool) -> bool:
    return result if isinstance(result, bool) else await result


async def has_statuses(database_url: str, schema: str, expected: dict[str, int]) -> bool:
    return await statuses(database_url, schema) == expected


async def test_1000_jobs_across_a_5s_outage_run_once_and_every_outcome_is_recorded(
    database_url: str, pg_schema: str, caplog: pytest.LogCaptureFixture, outage: Outage
) -> None:
    await across_an_outage(database_url, pg_schema, caplog, outage, 1000, 30.0, 5.0)


async def test_an_outage_longer_than_the_settles_own_retries_runs_nothing_twice(
    database_url: str, pg_schema: str, caplog: pytest.LogCaptureFixture, proxy_outage: Outage
) -> None:
    await across_an_outage(database_url, pg_schema, caplog, proxy_outage, 50, 45.0, 32.0)
    # the settles' first tries on the pool gave up long before: they were kept
    assert any("kept while PostgreSQL was away" in r.getMessage() for r in caplog.records)


async def across_an_outage(
    database_url: str,
    pg_schema: str,
    caplog: pytest.LogCaptureFixture,
    outage: Outage,
    jobs: int,
    lease: float,
    outage_secs: float,
) -> None:
    """``jobs`` jobs started, then ``outage`` for ``outage_secs`` while every one of them ends
    (a tenth as dead letters); each must run once and every outcome be recorded after it."""
    async with PostgresBackend(database_url, schema=pg_schema) as direct:
        producer = await Producer.create(KeptQueues, direct)
        await producer.enqueue_many([Step(n=n) for n in range(jobs)])
    runs: Counter[int] = Counter()
    release = asyncio.Event()
    caplog.set_level(logging.INFO, logger="queuey.postgres")
    backend = await PostgresBackend.connect(outage.url, schema=pg_schema, lease=lease)
    worker = Worker(KeptQueues, backend, concurrency=jobs, close_backend_on_shutdown=True)

    @worker.handler(Step)
    async def step(job: Step, ctx: JobContext) -> None:
        runs[job.n] += 1  # the handlers' own record of every run
        await release.wait()
        if job.n % 10 == 0:
            raise Fatal("a tenth of the jobs end as dead letters")

    task = asyncio.create_task(worker.run())
    try:
        await until(lambda: len(runs) == jobs, 60, "every job started")
        await outage.cut()
        release.set()  # every outcome now meets a database it cannot reach
        await asyncio.sleep(outage_secs)
        if outage.observable:
            assert await statuses(database_url, pg_schema) == {"running": jobs}
        await outage.restore()
        expected = {"done": jobs - jobs // 10, "failed": jobs // 10}
        await until(
            lambda: has_statuses(database_url, pg_schema, expected),
            20,
            "every outcome recorded after the outage",
        )
    finally:
        worker.shutdown()
        await task
    assert len(runs) == jobs and set(runs.values()) == {1}, "a job ran twice"
    assert worker.settle_failures == 0


class HeldQueues(QueueSet, prefix="held"):
    work = Queue(prefetch=4)


class Long(Job[HeldQueues], queue=HeldQueues.work, name="held.Long"):
    n: int


async def test_leases_whose_heartbeats_failed_are_renewed_first_when_the_database_is_back(
    database_url: str, pg_schema: str, proxy_outage: Outage
) -> None:
    lease = 45.0  # a heartbeat every 15 s; the outage (20 s) misses at least one
    async with PostgresBackend(database_url, schema=pg_schema) as direct:
        producer = await Producer.create(HeldQueues, direct)
        await producer.enqueue_many([Long(n=n) for n in range(4)])
    runs: Counter[int] = Counter()
    release = asyncio.Event()
    backend = await PostgresBackend.connect(
        # poll_only: no LISTEN session, whose reconnection would renew the leases too
        proxy_outage.url,
        schema=pg_schema,
        lease=lease,
        poll_only=True,
        poll_interval="1s",
    )
    worker = Worker(HeldQueues, backend, close_backend_on_shutdown=True)

    @worker.handler(Long)
    async def long(job: Long, ctx: JobContext) -> None:
        runs[job.n] += 1
        await release.wait()

    task = asyncio.create_task(worker.run())
    try:
        await until(lambda: len(runs) == 4, 30, "every job started")
        await proxy_outage.cut()
        await asyncio.sleep(20.0)
        # Before the outage the leases were last renewed at most 15 s before the cut, so
        # they end 10 to 25 s after the restart unless they are renewed at once (the pool
        # itself may reconnect seconds later: its backoff doubles through the outage).
        await proxy_outage.restore()

        async def renewed() -> bool:
            left = await lease_left(database_url, pg_schema)
            return len(left) == 4 and min(left) > lease - 3.0

        await until(renewed, 3.0, "the leases renewed as soon as the database answered")
        release.set()
        await until(
            lambda: has_statuses(database_url, pg_schema, {"done": 4}),
            20,
            "every outcome recorded",
        )
    finally:
        release.set()
        worker.shutdown()
        await task
    assert runs == Counter({0: 1, 1: 1, 2: 1, 3: 1})
