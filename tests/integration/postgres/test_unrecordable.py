"""An outcome the database refuses for good never leaves its row ``running``, on PostgreSQL: a
retry or deferral past the timestamp range, or one a ``CHECK`` constraint or a trigger of the
table refuses, ends the row ``failed`` with a reason naming the outcome that could not be
recorded and why, counted in ``settle_failures`` and shown to the middleware. When even that
dead letter is refused, the row is left to its lease as before (never handed back to run the
same refused outcome again at once)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from psycopg import sql

from queuey import Defer, Job, JobContext, Producer, Queue, QueueSet, Retry, RetryPolicy, Worker
from queuey._outcome import DeferFor, Outcome, RetryAfter
from queuey._runtime.middleware import CallNext
from queuey.backends.base import Delivery
from queuey.backends.postgres import PostgresBackend
from queuey.worker import Middleware
from tests.integration.postgres.worker_processes import execute, message_rows

pytestmark = pytest.mark.postgres

FAR = timedelta(days=999_999_999)  # the longest timedelta: far past PostgreSQL's timestamps


class RefQueues(QueueSet, prefix="ref"):
    work = Queue(prefetch=4, retry=RetryPolicy.fixed(3, "50ms"), max_priority=3)


class Step(Job[RefQueues], queue=RefQueues.work, name="ref.Step"):
    n: int
    signal: str = ""


class Seen(Middleware):
    """Records the outcomes recorded and the settle failures, and can replace the outcome."""

    def __init__(self, replace: str = "") -> None:
        self.replace = replace
        self.events: list[tuple[str, str]] = []

    async def around_call(self, delivery: Delivery, call_next: CallNext) -> Outcome:
        outcome = await call_next(delivery)
        envelope = delivery.envelope
        if self.replace == "retry":
            return RetryAfter(envelope.next_attempt(), FAR, "boom")
        if self.replace == "defer":
            return DeferFor(envelope.deferred(3), FAR, "later")
        return outcome

    def on_outcome(self, delivery: Delivery, outcome: Outcome) -> None:
        self.events.append(("recorded", outcome.kind.value))

    def on_settle_failure(self, delivery: Delivery, outcome: Outcome, error: Exception) -> None:
        self.events.append(("not recorded", outcome.kind.value))


@pytest.fixture
def backend_settings() -> dict[str, Any]:
    return {"lease": "1s", "poll_interval": "300ms"}


async def run_until_settled(worker: Worker[RefQueues], seen: Seen, count: int) -> None:
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(10):
            while len([e for e in seen.events if e[0] == "recorded"]) < count:
                await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # past the lease: nothing runs again
    finally:
        worker.shutdown()
        await task


def worker_with(backend: PostgresBackend, seen: Seen, runs: list[int]) -> Worker[RefQueues]:
    worker = Worker(RefQueues, backend, middleware=[seen])

    @worker.handler(Step)
    def handle(job: Step, ctx: JobContext) -> None:
        runs.append(job.n)
        if job.signal == "retry":
            raise Retry("refuse me")
        if job.signal == "defer":
            raise Defer("1s", "refuse me")

    return worker


@pytest.mark.parametrize(
    ("replace", "what"),
    [("retry", "the retry in 8.64e+13s"), ("defer", "the deferral for 8.64e+13s")],
)
async def test_an_outcome_past_the_timestamp_range_ends_failed_with_the_reason(
    backend: PostgresBackend, database_url: str, replace: str, what: str
) -> None:
    producer = await Producer.create(RefQueues, backend)
    await producer.enqueue(Step(n=1))
    seen = Seen(replace)
    runs: list[int] = []
    worker = worker_with(backend, seen, runs)
    await run_until_settled(worker, seen, 1)
    status, attempts, redeliveries, error = (
        await message_rows(database_url, backend.statements.schema)
    )[1]
    assert (status, attempts, redeliveries) == ("failed", 1, 0)
    assert error is not None and error.startswith(
        f"could not record {what}: PostgreSQL: timestamp out of range"
    ), error
    assert runs == [1], "never run again"
    kind = "retried" if replace == "retry" else "deferred"
    assert seen.events == [("not recorded", kind), ("recorded", "dead")]
    assert worker.settle_failures == 1
    assert worker.stats[RefQueues.work.name].dead == 1
    assert [reason for _, reason in worker.dead_letters] == [error]


REFUSE_RETRIES = """
ALTER TABLE {table} ADD CONSTRAINT refuse_retries
    CHECK (status <> 'pending' OR error IS NULL OR error NOT LIKE 'refuse me%%')
"""

REFUSE_DEFERRALS = """
CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.deferrals > OLD.deferrals THEN
        RAISE EXCEPTION 'deferrals are refused here';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_deferrals BEFORE UPDATE ON {table} FOR EACH ROW
    EXECUTE FUNCTION {function}();
"""

REFUSE_FAILING = """
CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'running' AND NEW.status IN ('pending', 'failed') THEN
        RAISE EXCEPTION 'this row may only succeed';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_failing BEFORE UPDATE ON {table} FOR EACH ROW
    EXECUTE FUNCTION {function}();
"""


REFUSE_SUCCESS_OF_13 = """
CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'done' AND NEW.payload->>'n' = '13' THEN
        RAISE EXCEPTION 'job 13 may not succeed';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_success BEFORE UPDATE ON {table} FOR EACH ROW
    EXECUTE FUNCTION {function}();
"""


async def refuse(url: str, schema: str, ddl: str) -> None:
    await execute(
        url,
        sql.SQL(ddl).format(
            table=sql.Identifier(schema, "queue_message"),
            function=sql.Identifier(schema, "refuse"),
        ),
    )


@pytest.mark.parametrize(
    ("signal", "ddl", "what", "why"),
    [
        ("retry", REFUSE_RETRIES, "the retry in 0.05s", 'violates check constraint "refuse'),
        ("defer", REFUSE_DEFERRALS, "the deferral for 1s", "deferrals are refused here"),
    ],
)
async def test_an_outcome_the_table_refuses_ends_failed_with_the_reason(
    backend: PostgresBackend, database_url: str, signal: str, ddl: str, what: str, why: str
) -> None:
    schema = backend.statements.schema
    await refuse(database_url, schema, ddl)
    producer = await Producer.create(RefQueues, backend)
    await producer.enqueue(Step(n=1, signal=signal))
    seen = Seen()
    runs: list[int] = []
    worker = worker_with(backend, seen, runs)
    await run_until_settled(worker, seen, 1)
    status, attempts, _, error = (await message_rows(database_url, schema))[1]
    assert (status, attempts) == ("failed", 1)
    assert error is not None and error.startswith(f"could not record {what}: PostgreSQL: ")
    assert why in error and error.endswith("(the outcome's reason: refuse me)"), error
    assert runs == [1]
    assert worker.settle_failures == 1


async def test_when_the_dead_letter_is_refused_too_the_row_is_left_to_its_lease(
    backend: PostgresBackend, database_url: str
) -> None:
    schema = backend.statements.schema
    await refuse(database_url, schema, REFUSE_FAILING)
    producer = await Producer.create(RefQueues, backend)
    await producer.enqueue(Step(n=1, signal="retry"))
    seen = Seen()
    runs: list[int] = []
    worker = worker_with(backend, seen, runs)
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(10):
            while worker.settle_failures < 2:
                await asyncio.sleep(0.02)
        status, attempts, redeliveries, _ = (await message_rows(database_url, schema))[1]
    finally:
        worker.shutdown()
        await task
    assert (status, attempts, redeliveries) == ("running", 1, 0), "not handed back to run again"
    assert seen.events[:2] == [("not recorded", "retried"), ("not recorded", "dead")]


async def test_a_refused_success_fails_only_its_own_row_of_a_batch(
    backend: PostgresBackend, database_url: str
) -> None:
    schema = backend.statements.schema
    await refuse(database_url, schema, REFUSE_SUCCESS_OF_13)
    producer = await Producer.create(RefQueues, backend)
    await producer.enqueue_many([Step(n=n) for n in range(30)])
    seen = Seen()
    worker = Worker(RefQueues, backend, middleware=[seen], concurrency=30)

    @worker.handler(Step)
    async def handle(job: Step, ctx: JobContext) -> None:
        await asyncio.sleep(0.05)  # the acks arrive together: one batch statement

    await run_until_settled(worker, seen, 30)
    rows = await message_rows(database_url, schema)
    assert {n for n, row in rows.items() if row[0] == "done"} == set(range(30)) - {13}
    status, attempts, _, error = rows[13]
    assert (status, attempts) == ("failed", 1)
    assert error is not None and error.startswith("could not record the success: PostgreSQL: ")
    assert "job 13 may not succeed" in error
    assert worker.settle_failures == 1
