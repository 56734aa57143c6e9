"""The unique-key rule on the PostgreSQL-only paths: a lost lease, and an operator's retry
(``Admin``, ``queuey failed retry``, the dashboard). A job coming back to pending takes its key
back; when a newer job holds it, the lease reclaim supersedes it and an operator's retry leaves
it alone, saying which job holds the key."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from queuey import Fatal, Job, JobContext, Producer, Queue, QueueSet, Unique, Worker
from queuey.backends.postgres import PgDashboardStore, PostgresBackend
from queuey.backends.postgres._admin import Admin
from queuey.cli import main
from tests.helpers import run_until
from tests.integration.postgres.dashboard_helpers import (
    ADMIN_KEY,
    BASE,
    client,
    csrf_of,
    dashboard,
    sign_in,
)
from tests.integration.postgres.test_unique import rows

pytestmark = pytest.mark.postgres


class RuleQueues(QueueSet, prefix="ur"):
    sync = Queue(prefetch=8)


class Account(
    Job[RuleQueues], queue=RuleQueues.sync, name="ur.Account", unique=Unique(by=("account_id",))
):
    account_id: int
    note: str = ""


class PendingOnly(
    Job[RuleQueues],
    queue=RuleQueues.sync,
    name="ur.PendingOnly",
    unique=Unique(by=("account_id",), states=("pending",)),
):
    account_id: int


class Debounced(
    Job[RuleQueues],
    queue=RuleQueues.sync,
    name="ur.Debounced",
    unique=Unique(by=("account_id",), on_conflict="replace"),
):
    account_id: int
    note: str = ""


@pytest.fixture
def backend_settings() -> dict[str, Any]:
    return {"poll_interval": "30s", "lease": "1s"}


@pytest.mark.parametrize("job", [PendingOnly(account_id=1), Debounced(account_id=1, note="a")])
async def test_a_lost_lease_under_a_newer_holder_ends_superseded(
    backend: PostgresBackend, database_url: str, pg_schema: str, job: Any
) -> None:
    producer = await Producer.create(RuleQueues, backend)
    first = await producer.enqueue(job)
    claims = await backend.claim(type(job).job_queue().config, 1)
    assert claims is not None and claims[0][0] == first
    newer = await producer.enqueue_after(job.model_copy(update={}), "1h")
    assert newer.outcome == "inserted"
    backend._held.clear()  # as if the worker died: no heartbeat
    await asyncio.sleep(1.2)
    await backend.sweep()
    found = {str(r[0]): r[1:] for r in await rows(database_url, pg_schema, "id", "status", "error")}
    status, error = found[first]
    assert status == "cancelled" and error.startswith(f"superseded: job {newer} holds its")
    assert found[newer][0] == "pending"


def dead_once(worker: Worker[RuleQueues]) -> Callable[[], bool]:
    return lambda: "ur.sync" in worker.stats and worker.stats["ur.sync"].dead == 1


async def failed_twice(backend: PostgresBackend) -> tuple[str, str]:
    """Two failed jobs of one key (each failed before the next was enqueued)."""
    producer = await Producer.create(RuleQueues, backend)
    ids = []
    for note in ("first", "second"):
        ids.append(await producer.enqueue(Account(account_id=9, note=note)))
        worker = Worker(RuleQueues, backend)

        @worker.handler(Account)
        async def handle(job: Account, ctx: JobContext) -> None:
            raise Fatal(job.note)

        await run_until(worker, dead_once(worker))
    return ids[0], ids[1]


async def test_an_operators_retry_leaves_a_job_whose_key_is_held_and_says_so(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    old, _ = await failed_twice(backend)
    producer = await Producer.create(RuleQueues, backend)
    holder = await producer.enqueue_after(Account(account_id=9, note="holder"), "1h")
    admin = Admin(database_url, schema=pg_schema)
    assert await admin.retry(old) == []
    held = await admin.held(old)
    assert [(h.id, h.holder, h.holder_status) for h in held] == [(old, holder, "pending")]
    result = await asyncio.to_thread(
        CliRunner().invoke,
        main,
        ["failed", "retry", old, "--database-url", database_url, "--schema", pg_schema],
    )
    assert result.exit_code == 1, result.output
    assert f"left {old} failed: job {holder} (pending) holds its unique key" in result.output
    async with PgDashboardStore(database_url, schema=pg_schema, topic_channel="x") as store:
        assert await store.retry("ops", job_id=old) == 0
    assert await admin.retry_all() == []
    statuses = {str(r[0]): r[1] for r in await rows(database_url, pg_schema, "id", "status")}
    assert statuses[old] == "failed"


async def test_an_operators_retry_takes_the_key_back_and_runs_the_newest_of_a_key_once(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    older, newer = await failed_twice(backend)
    admin = Admin(database_url, schema=pg_schema)
    touched = await admin.retry_all(queue="ur.sync")
    assert [(t.queue, t.count) for t in touched] == [("ur.sync", 1)]
    assert [(h.id, h.holder) for h in await admin.held()] == [(older, newer)]
    producer = await Producer.create(RuleQueues, backend)
    again = await producer.enqueue(Account(account_id=9, note="again"))
    assert (again.outcome, again) == ("skipped", newer)  # the retried job holds its key again
    statuses = {str(r[0]): r[1] for r in await rows(database_url, pg_schema, "id", "status")}
    assert (statuses[older], statuses[newer]) == ("failed", "pending")


async def test_the_dashboards_retry_of_a_job_whose_key_is_held_says_so(
    backend: PostgresBackend, database_url: str, pg_schema: str
) -> None:
    old, _ = await failed_twice(backend)
    producer = await Producer.create(RuleQueues, backend)
    await producer.enqueue_after(Account(account_id=9, note="holder"), "1h")
    async with PgDashboardStore(database_url, schema=pg_schema, topic_channel="x") as store:
        async with client(dashboard(store)) as http:
            await sign_in(http, ADMIN_KEY)
            page = await http.get(f"{BASE}/jobs/{old}")
            form = {"id": old, "csrf": csrf_of(page.text), "confirm": "yes"}
            answer = await http.post(f"{BASE}/actions/retry", data=form)
            shown = await http.get(answer.headers["location"])
    assert "Another job holds this job&#39;s unique key: nothing was done" in shown.text
    statuses = {str(r[0]): r[1] for r in await rows(database_url, pg_schema, "id", "status")}
    assert statuses[old] == "failed"
