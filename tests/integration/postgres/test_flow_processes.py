"""Flow limits hold across real worker processes on PostgreSQL, checked from the handlers' own
start and end records: a concurrency cap of 3 per key over three processes, one killed with
SIGKILL mid-run (its rows come back after their lease; nothing lost, never 4 of a key running),
and a rate limit of 5/s per key over two processes."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest
from psycopg import sql

from queuey import Producer
from queuey.backends.postgres import PostgresBackend
from tests.integration.postgres.flow_app import RUNS_DDL, Capped, FlowApp, Rated
from tests.integration.postgres.worker_processes import WorkerProcess, execute, wait_for

pytestmark = pytest.mark.postgres


class FlowWorker(WorkerProcess):
    def __init__(self, url: str, schema: str) -> None:
        super().__init__(url, schema, 8)
        self.args = [sys.executable, "-m", "tests.integration.postgres.flow_app", url, schema]


async def start_workers(url: str, schema: str, count: int) -> list[FlowWorker]:
    """``count`` worker processes, started at once (each start waits until it is ready)."""
    workers = [FlowWorker(url, schema) for _ in range(count)]
    await asyncio.gather(*(asyncio.to_thread(worker.start) for worker in workers))
    return workers


async def runs(url: str, schema: str) -> list[tuple[int, str, int, float, float | None]]:
    rows = await execute(
        url,
        sql.SQL(
            "SELECT n, tenant, pid, extract(epoch FROM started)::float8, "
            "extract(epoch FROM ended)::float8 FROM {} ORDER BY started"
        ).format(sql.Identifier(schema, "flow_runs")),
    )
    return [tuple(row) for row in rows]


async def done_count(url: str, schema: str) -> int:
    rows = await execute(
        url,
        sql.SQL("SELECT count(*) FROM {} WHERE status = 'done'").format(
            sql.Identifier(schema, "queue_message")
        ),
    )
    return int(rows[0][0])


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The largest number of ``intervals`` that hold one instant."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    held = peak = 0
    for _, step in events:
        held += step
        peak = max(peak, held)
    return peak


async def test_a_cap_of_3_per_key_holds_across_processes_and_a_sigkill(
    database_url: str, pg_schema: str
) -> None:
    await execute(database_url, sql.SQL(RUNS_DDL).format(sql.Identifier(pg_schema, "flow_runs")))
    jobs = [Capped(tenant=t, n=n, sleep_ms=1000) for n in range(30) for t in ("a", "b", "c")]
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowApp, backend)
        await producer.enqueue_many(jobs)
    workers = await start_workers(database_url, pg_schema, 3)
    try:
        await wait_for(lambda: _started(database_url, pg_schema, 12), 60)
        busy: list[int] = []
        async with asyncio.timeout(30):
            while not busy:  # a process with a run begun in the last 0.2 s of its 1 s
                open_runs = await runs(database_url, pg_schema)
                now = await execute(database_url, "SELECT extract(epoch FROM clock_timestamp())")
                busy = [
                    pid
                    for _, _, pid, started, ended in open_runs
                    if ended is None and float(now[0][0]) - started < 0.2
                ]
                await asyncio.sleep(0.01)
        killed = next(worker for worker in workers if worker.pid == busy[0])
        killed.signal(signal.SIGKILL)
        await killed.exited(10)
        killed_at = await execute(database_url, "SELECT extract(epoch FROM clock_timestamp())")
        workers += await start_workers(database_url, pg_schema, 1)
        try:
            await wait_for(lambda: _all_done(database_url, pg_schema, len(jobs)), 40)
        except TimeoutError:
            state = await execute(
                database_url,
                sql.SQL("SELECT status, attempts, count(*) FROM {} GROUP BY 1, 2").format(
                    sql.Identifier(pg_schema, "queue_message")
                ),
            )
            raise AssertionError(state) from None
    finally:
        for worker in workers:
            worker.stop()
    recorded = await runs(database_url, pg_schema)
    assert {(n, t) for n, t, *_ in recorded} == {(job.n, job.tenant) for job in jobs}
    # a run of the killed process ended at the latest when the kill was seen
    cut = float(killed_at[0][0])
    for tenant in "abc":
        spans = [(s, e if e is not None else cut) for _, t, _, s, e in recorded if t == tenant]
        assert most_at_once(spans) <= 3, tenant
    assert any(pid == killed.pid and e is None for _, _, pid, _, e in recorded)


async def test_a_rate_of_5_per_second_per_key_holds_across_processes(
    database_url: str, pg_schema: str
) -> None:
    await execute(database_url, sql.SQL(RUNS_DDL).format(sql.Identifier(pg_schema, "flow_runs")))
    jobs = [Rated(tenant=t, n=n) for n in range(15) for t in ("a", "b")]
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(FlowApp, backend)
        await producer.enqueue_many(jobs)
    workers = await start_workers(database_url, pg_schema, 2)
    try:
        await wait_for(lambda: _all_done(database_url, pg_schema, len(jobs)), 60)
    finally:
        for worker in workers:
            worker.stop()
    recorded = await runs(database_url, pg_schema)
    for tenant in "ab":
        starts = sorted(s for _, t, _, s, _ in recorded if t == tenant)
        assert len(starts) == 15
        # 5 at once, then 5 a second later, then 5 more: never 6 in a window (with a margin of
        # 0.3 s for a handler that starts late on a loaded machine)
        for i, first in enumerate(starts):
            assert sum(1 for s in starts[i:] if s - first < 0.7) <= 5, (tenant, starts)
        assert starts[-1] - starts[0] >= 1.8, (tenant, starts)
        assert starts[-1] - starts[0] < 10, (tenant, starts)  # slept to the next start, no poll


async def _started(url: str, schema: str, count: int) -> bool:
    return len(await runs(url, schema)) >= count


async def _all_done(url: str, schema: str, count: int) -> bool:
    await asyncio.sleep(0.2)
    return await done_count(url, schema) == count
