"""The batch path on PostgreSQL: a batch's outcomes recorded by one ``settle_batch`` statement
leave every row as its single settle would (a retry's error in the row's errors, a deferral's
count, a dead letter's reason), and a retry of a unique job, which that statement leaves alone,
is still recorded by its own statement (its unique key taken back)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from psycopg import sql

from queuey import (
    BatchContext,
    Defer,
    Fatal,
    Job,
    Producer,
    Queue,
    QueueSet,
    Retry,
    RetryPolicy,
    Unique,
    Worker,
)
from queuey.backends.postgres import PostgresBackend
from tests.helpers import run_until
from tests.integration.postgres.dashboard_helpers import execute

pytestmark = pytest.mark.postgres


class PathQueues(QueueSet, prefix="bpath"):
    work = Queue(prefetch=20)


class Step(
    Job[PathQueues], queue=PathQueues.work, name="bpath.Step", retry=RetryPolicy.fixed(3, "1h")
):
    label: str


class Keyed(
    Job[PathQueues],
    queue=PathQueues.work,
    name="bpath.Keyed",
    retry=RetryPolicy.fixed(3, "1h"),
    unique=Unique(by=("label",)),
):
    label: str


async def rows(url: str, schema: str) -> dict[str, tuple[Any, ...]]:
    found = await execute(
        url,
        sql.SQL(
            "SELECT payload->>'label', status, attempts, deferrals, error, errors::text,"
            " available_at > now(), claimed_by, unique_key FROM {}"
        ).format(sql.Identifier(schema, "queue_message")),
    )
    return {row[0]: tuple(row[1:]) for row in found}


async def test_one_statement_records_each_outcome_as_its_own_settle_would(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(PathQueues, backend)
    await producer.enqueue_many([Step(label=label) for label in ("ok", "retry", "defer", "fatal")])
    worker = Worker(PathQueues, backend, concurrency=20, min_defer="1s")
    calls: list[list[str]] = []

    @worker.batch_handler(Step, size=4, wait="2s")
    async def handle(jobs: list[Step], ctx: BatchContext) -> list[BaseException | None]:
        calls.append([job.label for job in jobs])
        ends = {"retry": Retry("later"), "defer": Defer("1h", "wait"), "fatal": Fatal("bad")}
        return [ends.get(job.label) for job in jobs]

    stats = worker.stats[PathQueues.work.name]
    await run_until(
        worker, lambda: stats.succeeded + stats.retried + stats.dead >= 3 and stats.deferred == 1
    )
    assert [sorted(call) for call in calls] == [["defer", "fatal", "ok", "retry"]]
    found = await rows(database_url, pg_schema)
    assert found["ok"][:2] == ("done", 1) and found["ok"][6] is None
    status, attempts, deferrals, error, errors, later, owner, _ = found["retry"]
    assert (status, attempts, deferrals, later, owner) == ("pending", 1, 0, True, None)
    assert "later" in error
    (failure,) = json.loads(errors)
    assert failure["attempt"] == 1 and "later" in failure["message"] and failure["worker"]
    assert found["defer"][:3] == ("pending", 0, 1) and found["defer"][5] is True
    assert found["fatal"][0] == "failed" and "bad" in found["fatal"][3]
    assert (stats.succeeded, stats.retried, stats.deferred, stats.dead) == (1, 1, 1, 1)


async def test_a_unique_jobs_retry_in_a_batch_takes_its_key_back(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(PathQueues, backend)
    await producer.enqueue_many([Keyed(label="a"), Keyed(label="b")])
    worker = Worker(PathQueues, backend, concurrency=20)
    seen: list[str] = []

    @worker.batch_handler(Keyed, size=2, wait="2s")
    async def handle(jobs: list[Keyed], ctx: BatchContext) -> list[BaseException | None]:
        seen.extend(job.label for job in jobs)
        return [Retry("again") if job.label == "a" else None for job in jobs]

    stats = worker.stats[PathQueues.work.name]
    await run_until(worker, lambda: stats.succeeded == 1 and stats.retried == 1)
    found = await rows(database_url, pg_schema)
    assert found["a"][0] == "pending" and found["a"][7] is not None  # its key held again
    assert found["b"][0] == "done"
    again = await producer.enqueue(Keyed(label="a"))
    assert not again.inserted and sorted(seen) == ["a", "b"]
