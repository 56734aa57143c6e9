"""The operations commands (``queuey status``, ``queuey failed list|show|retry|discard``) against
a live PostgreSQL, with rows made by real jobs run through ``Producer`` and ``Worker``.

The landscape every test starts from (``land``): on ``ops.emails`` two failed rows and one
done; on ``ops.reports`` one failed row; on ``ops.images`` one row due (90 s overdue) and one
scheduled an hour ahead; on ``ops.slow`` one row running under a live worker, which also keeps
consuming emails, reports and slow during the test (it waits 60 s between polls, so a job it
picks up sooner was woken by a notification).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from queuey import Fatal, Job, JobContext, Producer, Queue, QueueSet, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.backends.postgres._admin import Admin
from queuey.cli import main

pytestmark = pytest.mark.postgres

SRC = Path(__file__).resolve().parents[3] / "src"
UNREACHABLE = "postgresql://ops:s3cretpw@127.0.0.1:1/test"
NOT_A_UUID = "not-a-uuid"
# libpq quotes the second one whole in its error: the password must be redacted from it.
MALFORMED = ("host=x password=s3cretpw bogus", "postgresql://u:s3cretpw@[::1/db")
UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"


class OpsQueues(QueueSet, prefix="ops"):
    emails = Queue()
    reports = Queue()
    images = Queue()
    slow = Queue()


class SendEmail(Job[OpsQueues], queue=OpsQueues.emails, name="ops.SendEmail"):
    to: str


class BuildReport(Job[OpsQueues], queue=OpsQueues.reports, name="ops.BuildReport"):
    month: str


class Resize(Job[OpsQueues], queue=OpsQueues.images, name="ops.Resize"):
    size: int


class Crunch(Job[OpsQueues], queue=OpsQueues.slow, name="ops.Crunch"):
    n: int


@dataclass
class Land:
    """The seeded database, its live worker, and the ids of the rows by label."""

    url: str
    schema: str
    worker: Worker[OpsQueues]
    ids: dict[str, str]
    accepted: set[str]
    release: asyncio.Event
    task: asyncio.Task[None]

    async def stop_worker(self) -> None:
        """Let the running job end and the worker return: nothing consumes any more."""
        self.release.set()
        self.worker.shutdown()
        await self.task

    def args(self, *argv: str) -> list[str]:
        return [*argv, "--database-url", self.url, "--schema", self.schema]

    async def cli(self, *argv: str) -> Result:
        return await invoke(self.args(*argv))

    async def rows(self) -> dict[str, tuple[Any, ...]]:
        """Every row by id: (status, attempts, redeliveries, error, due, claimed_by, payload)."""
        async with await psycopg.AsyncConnection.connect(self.url) as conn:
            cursor = await conn.execute(
                f"SELECT id::text, status, attempts, redeliveries, error, available_at <= now(), "
                f'claimed_by, payload FROM "{self.schema}".queue_message'
            )
            return {row[0]: row[1:] for row in await cursor.fetchall()}


async def invoke(args: list[str], env: dict[str, str | None] | None = None) -> Result:
    """Run the command line in a thread (it runs its own event loop)."""
    return await asyncio.to_thread(CliRunner().invoke, main, args, env=env)


async def eventually(check: Callable[[], bool], timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


def build_worker(backend: PostgresBackend, land: dict[str, Any]) -> Worker[OpsQueues]:
    worker = Worker(
        OpsQueues, backend, queues=[OpsQueues.emails, OpsQueues.reports, OpsQueues.slow]
    )
    accepted: set[str] = land["accepted"]

    @worker.handler(SendEmail)
    async def send(job: SendEmail, ctx: JobContext) -> None:
        if job.to.startswith("bad") and job.to not in accepted:
            raise Fatal(f"{job.to} is not a mailbox [red]here[/red]\nsecond line of the error")

    @worker.handler(BuildReport)
    async def report(job: BuildReport, ctx: JobContext) -> None:
        raise Fatal(f"no data for {job.month}")

    @worker.handler(Crunch)
    async def crunch(job: Crunch, ctx: JobContext) -> None:
        land["started"].set()
        await land["release"].wait()

    return worker


@pytest.fixture
async def land(database_url: str, pg_schema: str) -> AsyncIterator[Land]:
    backend = await PostgresBackend.connect(
        database_url, schema=pg_schema, poll_interval="60s", lease="30s"
    )
    state: dict[str, Any] = {
        "accepted": set(),
        "started": asyncio.Event(),
        "release": asyncio.Event(),
    }
    worker = build_worker(backend, state)
    producer = await Producer.create(OpsQueues, backend)
    ids: dict[str, str] = {
        "bad1": await producer.enqueue(SendEmail(to="bad1@example.com")),
        "bad2": await producer.enqueue(SendEmail(to="bad2@example.com")),
        "ok": await producer.enqueue(SendEmail(to="ok@example.com")),
        "report": await producer.enqueue(BuildReport(month="2024-05")),
        "due": await producer.enqueue(Resize(size=64)),
        "scheduled": await producer.enqueue_after(Resize(size=128), "1h"),
        "running": await producer.enqueue(Crunch(n=1)),
    }
    task = asyncio.create_task(worker.run())
    try:
        await eventually(lambda: worker.stats["ops.emails"].dead == 2)
        await eventually(lambda: worker.stats["ops.reports"].dead == 1)
        await eventually(lambda: worker.stats["ops.emails"].succeeded == 1)
        await asyncio.wait_for(state["started"].wait(), 10)
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                f'UPDATE "{pg_schema}".queue_message SET available_at = now() - interval '
                "'90 seconds' WHERE id = %s",
                (ids["due"],),
            )
        yield Land(database_url, pg_schema, worker, ids, state["accepted"], state["release"], task)
    finally:
        state["release"].set()
        worker.shutdown()
        await task
        await backend.close()


# -- status ---------------------------------------------------------------------------------


async def test_status_json_counts_each_state_per_queue(land: Land) -> None:
    result = await land.cli("status", "--json")
    assert result.exit_code == 0, result.output
    queues = {q["queue"]: q for q in json.loads(result.stdout)["queues"]}
    assert list(queues) == ["ops.emails", "ops.images", "ops.reports", "ops.slow"]
    counts = {
        name: (q["kind"], q["pending"], q["scheduled"], q["running"], q["failed"])
        for name, q in queues.items()
    }
    assert counts == {
        "ops.emails": ("job", 0, 0, 0, 2),
        "ops.images": ("job", 1, 1, 0, 0),
        "ops.reports": ("job", 0, 0, 0, 1),
        "ops.slow": ("job", 0, 0, 1, 0),
    }
    assert 90 <= queues["ops.images"]["oldest_pending_secs"] < 120
    assert queues["ops.emails"]["oldest_pending_secs"] is None
    assert set(queues["ops.slow"]) == {
        "kind", "queue", "pending", "scheduled", "running", "failed", "waiting",
        "oldest_pending_secs",
    }  # fmt: skip


async def test_status_table(land: Land) -> None:
    result = await land.cli("status")
    assert result.exit_code == 0, result.output
    headers = ("queue", "kind", "pending", "scheduled", "running", "failed", "waiting")
    for header in (*headers, "oldest pending"):
        assert header in result.stdout
    images = next(line for line in result.stdout.splitlines() if "ops.images" in line)
    assert [cell.strip() for cell in images.split("│")[1:-1]] == [
        "ops.images", "job", "1", "1", "0", "0", "0", images.split("│")[-2].strip()
    ]  # fmt: skip
    assert images.split("│")[-2].strip().startswith("1m 3")


async def test_status_of_an_empty_schema_says_so(database_url: str, pg_schema: str) -> None:
    result = await invoke(["status", "--database-url", database_url, "--schema", pg_schema])
    assert result.exit_code == 0
    assert "no pending, running, failed or waiting rows" in result.stdout
    result = await invoke(
        ["status", "--json", "--database-url", database_url, "--schema", pg_schema]
    )
    assert json.loads(result.stdout) == {"queues": []}


# -- failed list / show ---------------------------------------------------------------------


async def test_failed_list_text_shows_full_ids_and_first_error_lines(land: Land) -> None:
    result = await land.cli("failed", "list")
    assert result.exit_code == 0, result.output
    for label in ("bad1", "bad2", "report"):
        assert land.ids[label] in result.stdout
    assert land.ids["ok"] not in result.stdout and land.ids["running"] not in result.stdout
    assert "fatal error: bad1@example.com is not a mailbox [red]here[/red]" in result.stdout
    assert "second line" not in result.stdout


async def test_failed_list_json_shape_and_queue_filter(land: Land) -> None:
    result = await land.cli("failed", "list", "--json", "--queue", "ops.emails")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["failed"]
    assert {r["id"] for r in rows} == {land.ids["bad1"], land.ids["bad2"]}
    failed_at = [datetime.fromisoformat(r["processed_at"]) for r in rows]
    assert failed_at == sorted(failed_at)  # oldest failure first
    first = next(r for r in rows if r["id"] == land.ids["bad1"])
    assert set(first) == {"id", "kind", "queue", "job_type", "attempts", "processed_at", "error"}
    assert (first["kind"], first["queue"], first["job_type"], first["attempts"]) == (
        "job", "ops.emails", "ops.SendEmail", 1
    )  # fmt: skip
    assert first["error"] == "fatal error: bad1@example.com is not a mailbox [red]here[/red]"
    assert first["processed_at"].endswith("+00:00")


async def test_failed_list_limit(land: Land) -> None:
    result = await land.cli("failed", "list", "--json", "--limit", "1")
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)["failed"]) == 1
    assert "--limit" in result.stderr


async def test_failed_list_empty_exits_1(land: Land) -> None:
    result = await land.cli("failed", "list", "--queue", "ops.images")
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: no failed rows on ops.images"
    result = await land.cli("failed", "list", "--queue", "ops.images", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"failed": []}


async def test_failed_show_prints_payload_attempts_and_the_whole_error(land: Land) -> None:
    result = await land.cli("failed", "show", land.ids["bad1"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert land.ids["bad1"] in text and "ops.SendEmail" in text
    assert '"to": "bad1@example.com"' in text
    assert "attempts      1" in text and "redeliveries  0" in text
    assert "is not a mailbox [red]here[/red]\n  second line of the error" in text
    assert "attempt errors (1, oldest first; the latest 10 kept):" in text
    assert "    queuey.errors.Fatal: bad1@example.com is not a mailbox" in text
    assert "      Traceback (most recent call last):" in text and "in send" in text


async def test_failed_show_json(land: Land) -> None:
    result = await land.cli("failed", "show", land.ids["report"], "--json")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)
    assert row["payload"] == {"month": "2024-05"}
    assert (row["status"], row["attempts"], row["redeliveries"]) == ("failed", 1, 0)
    assert row["error"] == "fatal error: no data for 2024-05"
    assert row["processed_at"] and row["created_at"] and row["available_at"]
    (error,) = row["errors"]
    assert (error["attempt"], error["type"], error["message"]) == (
        1, "queuey.errors.Fatal", "no data for 2024-05"
    )  # fmt: skip
    assert error["traceback"].endswith("queuey.errors.Fatal: no data for 2024-05")
    assert datetime.fromisoformat(error["at"]) <= datetime.now(UTC)
    assert error["worker"] == land.worker.backend.owner  # type: ignore[attr-defined]


async def test_failed_show_unknown_or_not_failed_exits_1(land: Land) -> None:
    result = await land.cli("failed", "show", UNKNOWN_ID)
    assert (result.exit_code, result.stderr) == (1, f"error: no row with id {UNKNOWN_ID}\n")
    result = await land.cli("failed", "show", land.ids["running"])
    assert result.exit_code == 1
    assert "is running, not failed" in result.stderr


# -- retry ----------------------------------------------------------------------------------


async def test_retry_one_runs_it_again_and_it_succeeds(land: Land) -> None:
    before = await land.rows()
    land.accepted.add("bad1@example.com")
    result = await land.cli("failed", "retry", land.ids["bad1"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "retried 1 failed job(s) on ops.emails\n"
    # The worker polls every 60 s: picking the job up at once proves the retry woke it.
    await eventually(lambda: land.worker.stats["ops.emails"].succeeded == 2, timeout=10)
    after = await land.rows()
    assert after[land.ids["bad1"]][:3] == ("done", 1, 0)  # a fresh count: this is run 1 again
    assert after[land.ids["bad1"]][3] == before[land.ids["bad1"]][3]  # the last error kept
    assert after[land.ids["bad2"]] == before[land.ids["bad2"]]


async def test_retry_resets_counts_makes_due_and_keeps_the_error(land: Land) -> None:
    await land.stop_worker()  # nobody picks the retried rows up: inspect them as retry left them
    admin = Admin(land.url, schema=land.schema)
    touched = await admin.retry_all(queue="ops.emails")
    assert [(t.kind, t.queue, t.count) for t in touched] == [("job", "ops.emails", 2)]
    row = await admin.show(land.ids["bad2"])
    assert row is not None
    assert (row.status, row.attempts, row.redeliveries, row.processed_at) == ("pending", 0, 0, None)
    assert row.error is not None and row.error.startswith("fatal error: bad2@example.com")
    status = {q.queue: q for q in await admin.status()}
    assert status["ops.emails"].pending == 2 and status["ops.emails"].failed == 0


async def test_retry_all_touches_only_failed_rows(land: Land) -> None:
    before = await land.rows()
    result = await land.cli("failed", "retry", "--all")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "retried 2 failed job(s) on ops.emails",
        "retried 1 failed job(s) on ops.reports",
    ]
    after = await land.rows()
    for label in ("ok", "due", "scheduled", "running"):
        assert after[land.ids[label]] == before[land.ids[label]], label


async def test_retry_all_of_one_queue(land: Land) -> None:
    result = await land.cli("failed", "retry", "--all", "--queue", "ops.reports")
    assert result.exit_code == 0, result.output
    assert result.stdout == "retried 1 failed job(s) on ops.reports\n"
    rows = await land.rows()
    assert rows[land.ids["bad1"]][0] == rows[land.ids["bad2"]][0] == "failed"


async def test_retry_of_a_row_that_is_not_failed_changes_nothing(land: Land) -> None:
    before = await land.rows()
    result = await land.cli("failed", "retry", land.ids["running"])
    assert result.exit_code == 1
    assert "still runs (its worker holds it): nothing to retry" in result.stderr
    for label, status in (("due", "pending"), ("ok", "done")):
        result = await land.cli("failed", "retry", land.ids[label])
        assert result.exit_code == 1, label
        assert f"is {status}, not failed: nothing to retry" in result.stderr
    result = await land.cli("failed", "retry", land.ids["bad1"], "--queue", "ops.reports")
    assert result.exit_code == 1
    assert "is on ops.emails, not ops.reports" in result.stderr
    result = await land.cli("failed", "retry", UNKNOWN_ID)
    assert (result.exit_code, result.stderr) == (1, f"error: no row with id {UNKNOWN_ID}\n")
    after = await land.rows()
    for label in ("running", "due", "ok", "bad1"):
        assert after[land.ids[label]] == before[land.ids[label]], label


async def test_retry_all_with_nothing_failed_exits_1(land: Land) -> None:
    result = await land.cli("failed", "retry", "--all", "--queue", "ops.images")
    assert result.exit_code == 1
    assert result.stderr == "error: no failed rows to retry on ops.images\n"


# -- discard --------------------------------------------------------------------------------


async def test_discard_one_deletes_it(land: Land) -> None:
    result = await land.cli("failed", "discard", land.ids["bad1"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "discarded 1 failed job(s) on ops.emails\n"
    rows = await land.rows()
    assert land.ids["bad1"] not in rows and land.ids["bad2"] in rows
    result = await land.cli("failed", "discard", land.ids["bad1"])
    assert (result.exit_code, result.stderr) == (1, f"error: no row with id {land.ids['bad1']}\n")


async def test_discard_all_deletes_only_failed_rows(land: Land) -> None:
    before = await land.rows()
    result = await land.cli("failed", "discard", "--all")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "discarded 2 failed job(s) on ops.emails",
        "discarded 1 failed job(s) on ops.reports",
    ]
    after = await land.rows()
    kept = {land.ids[label] for label in ("ok", "due", "scheduled", "running")}
    assert set(after) == kept
    assert all(after[row_id] == before[row_id] for row_id in kept)
    result = await land.cli("failed", "discard", "--all")
    assert (result.exit_code, result.stderr) == (1, "error: no failed rows to discard\n")


async def test_discard_all_of_one_queue_and_not_a_running_row(land: Land) -> None:
    result = await land.cli("failed", "discard", "--all", "--queue", "ops.reports")
    assert result.exit_code == 0, result.output
    assert result.stdout == "discarded 1 failed job(s) on ops.reports\n"
    result = await land.cli("failed", "discard", land.ids["running"])
    assert result.exit_code == 1
    assert "still runs (its worker holds it): nothing to discard" in result.stderr
    rows = await land.rows()
    assert land.ids["report"] not in rows
    assert rows[land.ids["running"]][0] == "running"
    assert rows[land.ids["bad1"]][0] == "failed"


# -- usage and reachability -----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["failed", "retry"],
        ["failed", "discard"],
        ["failed", "retry", UNKNOWN_ID, "--all"],
        ["failed", "discard", UNKNOWN_ID, "--all"],
        ["failed", "retry", NOT_A_UUID],
        ["failed", "discard", NOT_A_UUID],
        ["failed", "show", NOT_A_UUID],
        ["failed", "show"],
        ["status", "--schema", "not-an-identifier"],
    ],
)
async def test_bad_usage_exits_2(database_url: str, argv: list[str]) -> None:
    result = await invoke([*argv, "--database-url", database_url])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""


@pytest.mark.parametrize("argv", [["status"], ["failed", "list"], ["failed", "retry", "--all"]])
async def test_missing_or_malformed_url_exits_2(argv: list[str]) -> None:
    result = await invoke(argv, env={"QUEUEY_DATABASE_URL": None})
    assert result.exit_code == 2
    assert "QUEUEY_DATABASE_URL" in result.stderr
    for url in MALFORMED:
        result = await invoke([*argv, "--database-url", url])
        assert result.exit_code == 2
        assert "malformed database url" in result.stderr and "s3cretpw" not in result.output


async def test_a_schema_never_migrated_exits_2_and_says_what_to_run(database_url: str) -> None:
    result = await invoke(["status", "--database-url", database_url, "--schema", "ops_nowhere"])
    assert result.exit_code == 2
    assert "queuey db migrate --schema ops_nowhere" in result.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["status", "--json"],
        ["failed", "list"],
        ["failed", "show", UNKNOWN_ID],
        ["failed", "retry", UNKNOWN_ID],
        ["failed", "retry", "--all"],
        ["failed", "discard", "--all"],
    ],
)
async def test_unreachable_database_exits_3_without_the_password(argv: list[str]) -> None:
    result = await invoke([*argv, "--database-url", UNREACHABLE])
    assert result.exit_code == 3, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("error: PostgreSQL") and result.stderr.count("\n") == 1
    assert "s3cretpw" not in result.output


async def test_unreachable_url_from_the_environment(database_url: str) -> None:
    result = await invoke(["failed", "list"], env={"QUEUEY_DATABASE_URL": UNREACHABLE})
    assert result.exit_code == 3
    assert "s3cretpw" not in result.output


# -- as a real process ----------------------------------------------------------------------


def run_queuey(*argv: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "QUEUEY_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "queuey", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_as_a_subprocess(land: Land) -> None:
    status = await asyncio.to_thread(
        run_queuey, "status", "--json", "--schema", land.schema, url=land.url
    )
    assert status.returncode == 0, status.stderr
    assert len(json.loads(status.stdout)["queues"]) == 4
    retry = await asyncio.to_thread(
        run_queuey, "failed", "retry", "--all", "--queue", "ops.reports", "--schema", land.schema,
        url=land.url,
    )  # fmt: skip
    assert (retry.returncode, retry.stdout) == (0, "retried 1 failed job(s) on ops.reports\n")
    down = await asyncio.to_thread(run_queuey, "status", "--schema", land.schema, url=UNREACHABLE)
    assert down.returncode == 3
    assert down.stdout == "" and len(down.stderr.splitlines()) == 1
    assert "s3cretpw" not in down.stderr
