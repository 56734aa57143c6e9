"""``queuey jobs cancel ID`` and ``queuey failed list|show|retry|discard --cancelled`` against a
live PostgreSQL: a cancelled job is listed, retried and discarded like a failed one, and
``failed ... --all`` never touches cancelled rows (nor the reverse)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from click.testing import CliRunner, Result

from queuey import Fatal, Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import Admin, PostgresBackend
from queuey.cli import main
from tests.helpers import run_until

pytestmark = pytest.mark.postgres


class Ops(QueueSet, prefix="jc"):
    work = Queue()


class Task(Job[Ops], queue=Ops.work, name="jc.Task"):
    n: int


def cli(url: str, schema: str, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--database-url", url, "--schema", schema])


async def land(url: str, schema: str) -> tuple[str, str, str]:
    """Three jobs: two pending (one scheduled an hour ahead), one failed."""
    async with await PostgresBackend.connect(url, schema=schema) as backend:
        producer = await Producer.create(Ops, backend)
        doomed = await producer.enqueue(Task(n=1))
        later = await producer.enqueue_after(Task(n=2), "1h")
        broken = await producer.enqueue(Task(n=3))
        worker = Worker(Ops, backend)

        @worker.handler(Task)
        async def handle(job: Task, ctx: JobContext) -> None:
            if job.n == 3:
                raise Fatal("broken")
            await asyncio.sleep(60)

        await Admin(url, schema=schema).cancel(doomed)  # before the worker can take it
        await run_until(worker, lambda: bool(worker.dead_letters))
    return doomed, later, broken


def test_cancel_list_retry_and_discard(database_url: str, pg_schema: str) -> None:
    doomed, later, broken = asyncio.run(land(database_url, pg_schema))
    result = cli(database_url, pg_schema, "jobs", "cancel", later)
    assert (result.exit_code, result.output) == (0, f"cancelled job {later}\n")

    again = cli(database_url, pg_schema, "jobs", "cancel", doomed)
    assert again.exit_code == 1
    assert f"no pending, scheduled or running job with id {doomed}" in again.output
    unknown = cli(database_url, pg_schema, "jobs", "cancel", str(uuid.uuid4()))
    assert unknown.exit_code == 1

    listed = cli(database_url, pg_schema, "failed", "list", "--cancelled", "--json")
    assert listed.exit_code == 0, listed.output
    assert {doomed, later} == {row["id"] for row in _json(listed.output)["failed"]}
    failed = cli(database_url, pg_schema, "failed", "list", "--json")
    assert [row["id"] for row in _json(failed.output)["failed"]] == [broken]
    shown = cli(database_url, pg_schema, "failed", "show", doomed)
    assert shown.exit_code == 0 and "cancelled" in shown.output
    assert "cancelled at" in shown.output and "failed" not in shown.output
    text = cli(database_url, pg_schema, "failed", "list", "--cancelled")
    rows = [line for line in text.output.splitlines() if not line.startswith(" ")]
    assert len(rows) == 2 and all(" cancelled 20" in row for row in rows), text.output
    assert all("failed" not in row for row in rows), text.output

    wrong = cli(database_url, pg_schema, "failed", "retry", doomed)
    assert wrong.exit_code == 1 and "is cancelled, not failed" in wrong.output
    assert "pass --cancelled" in wrong.output
    retried = cli(database_url, pg_schema, "failed", "retry", doomed, "--cancelled")
    assert retried.exit_code == 0, retried.output
    assert retried.output.startswith("retried 1 cancelled job(s) on "), retried.output
    discarded = cli(database_url, pg_schema, "failed", "discard", "--all", "--cancelled")
    assert discarded.exit_code == 0, discarded.output
    assert cli(database_url, pg_schema, "failed", "list", "--cancelled").exit_code == 1
    assert cli(database_url, pg_schema, "failed", "list").exit_code == 0  # broken is kept
    assert cli(database_url, pg_schema, "jobs", "cancel", doomed).exit_code == 0  # pending again


def _json(text: str) -> dict[str, list[dict[str, str]]]:
    import json

    document: dict[str, list[dict[str, str]]] = json.loads(text)
    return document
