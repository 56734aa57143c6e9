"""``enqueue_many`` of jobs of one class on PostgreSQL dumps them in one call (``JobBatch``):
it stores exactly what the job-by-job path stores, hands the handler the jobs it was given,
and leaves every job it cannot vouch for as one text to the job-by-job check (which names
the offending field). Unique and delayed batches, and the sync producer, take it too."""

from __future__ import annotations

import math
from typing import Any

import psycopg
import pytest
from psycopg import sql
from pydantic import Field

from queuey import (
    Job,
    JobContext,
    PayloadError,
    Producer,
    Queue,
    QueueSet,
    Unique,
    Worker,
    sync,
)
from queuey._job_batch import JobBatch
from queuey._payload import job_payload
from queuey.backends.postgres import PostgresBackend
from queuey.envelope import Envelope
from tests.helpers import run_until

pytestmark = pytest.mark.postgres


class BulkQueues(QueueSet, prefix="bulkb"):
    work = Queue(prefetch=64)


class Note(Job[BulkQueues], queue=BulkQueues.work, name="bulkb.Note"):
    body: str = ""
    items: list[Any] = Field(default_factory=list)
    size: float = 1.0


class Once(Job[BulkQueues], queue=BulkQueues.work, name="bulkb.Once", unique=Unique(by=("key",))):
    key: str


TEXTS = ["plain", "back\\slash \\N", "tab\tnew\nline", 'a "quote"', "éà ☃ 😀", "\u0000 nul"]


async def payloads(url: str, schema: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            sql.SQL("SELECT payload::text FROM {} ORDER BY seq").format(
                sql.Identifier(schema, "queue_message")
            )
        )
        return [row[0] for row in await cursor.fetchall()]


async def test_a_batch_stores_what_the_job_by_job_path_stores(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(BulkQueues, backend)
    jobs = [Note(body=t, items=[t, {t: [1, 2.5, True]}], size=n) for n, t in enumerate(TEXTS)]
    assert isinstance(producer._envelopes(jobs), JobBatch)
    await producer.enqueue_many(jobs)
    batched = await payloads(database_url, pg_schema)
    await backend.purge([BulkQueues.work.name])
    envelopes = [
        Envelope.new("bulkb.Note", "bulkb.work", job_payload(j, "bulkb.Note")) for j in jobs
    ]
    await backend.publish(envelopes)
    assert batched == await payloads(database_url, pg_schema)
    assert [Note.model_validate_json(text) for text in batched] == jobs


async def test_the_handler_gets_every_job_of_a_batch(backend: PostgresBackend) -> None:
    producer = await Producer.create(BulkQueues, backend)
    jobs = [Note(body=f"{n}\\{TEXTS[n % len(TEXTS)]}", size=n) for n in range(300)]
    ids = await producer.enqueue_many(jobs)
    seen: dict[str, Note] = {}
    worker = Worker(BulkQueues, backend)

    @worker.handler(Note)
    async def handle(job: Note, ctx: JobContext) -> None:
        seen[ctx.job_id] = job

    await run_until(worker, lambda: len(seen) == len(jobs))
    assert [seen[result.job_id] for result in ids] == jobs


@pytest.mark.parametrize(
    ("jobs", "batched"),
    [
        ([Note(body="a},{b"), Note()], False),  # the boundary inside a string
        ([Note(items=[None]), Note()], False),  # null: looked at job by job
        ([Note(items=[[[[1]]]]) for _ in range(40)], True),  # nested, each shallow
        ([Note(), Once(key="k")], False),  # two classes
    ],
)
async def test_what_the_batch_cannot_vouch_for_goes_job_by_job(
    backend: PostgresBackend, database_url: str, pg_schema: str, jobs: list[Any], batched: bool
) -> None:
    producer = await Producer.create(BulkQueues, backend)
    assert isinstance(producer._envelopes(jobs), JobBatch) is batched
    results = await producer.enqueue_many(jobs)
    stored = await payloads(database_url, pg_schema)
    assert [type(j).model_validate_json(t) for j, t in zip(jobs, stored, strict=True)] == jobs
    assert len({r.job_id for r in results}) == len(jobs)


async def test_a_bad_payload_in_a_batch_is_named_as_job_by_job(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(BulkQueues, backend)
    with pytest.raises(PayloadError, match=r"Note\.size"):
        await producer.enqueue_many([Note(), Note(size=math.nan)])
    deep: Any = 1
    for _ in range(120):
        deep = [deep]
    with pytest.raises(PayloadError, match="nests deeper than 100"):
        await producer.enqueue_many([Note(), Note(items=[deep])])
    with pytest.raises(PayloadError, match=r"Note\.body"):
        await producer.enqueue_many([Note(), Note(body="\ud800")])
    assert await payloads(database_url, pg_schema) == []  # nothing of the refused calls


async def test_unique_and_delayed_batches(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    producer = await Producer.create(BulkQueues, backend)
    first = await producer.enqueue_many([Once(key="a"), Once(key="b")])
    again = await producer.enqueue_many([Once(key="b"), Once(key="c")], delay="1h")
    assert [r.inserted for r in first + again] == [True, True, False, True]
    assert again[0].job_id == first[1].job_id
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(
            sql.SQL("SELECT payload->>'key', available_at > now() FROM {} ORDER BY seq").format(
                sql.Identifier(pg_schema, "queue_message")
            )
        )
        assert await cursor.fetchall() == [("a", False), ("b", False), ("c", True)]


def test_the_sync_producer_sends_a_batch(database_url: str, pg_schema: str) -> None:
    with sync.PostgresBackend.connect(database_url, schema=pg_schema) as backend:
        producer = sync.Producer.create(BulkQueues, backend)
        jobs = [Note(body=text) for text in TEXTS]
        assert isinstance(producer._envelopes(jobs), JobBatch)
        ids = producer.enqueue_many(jobs)
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL("SELECT id::text, payload::text FROM {} ORDER BY seq").format(
                sql.Identifier(pg_schema, "queue_message")
            )
        ).fetchall()
    assert [row[0] for row in rows] == [r.job_id for r in ids]
    assert [Note.model_validate_json(row[1]) for row in rows] == jobs
