"""``queuey jobs show ID``: a job in any state by the id ``enqueue`` returned; and the clear
answers where a newcomer's guess is wrong: ``--queue`` naming no queue, a synchronous
connection given to ``enqueue(connection=...)``.

The rows come from ``test_admin_cli``'s landscape (``land``): failed, done, due, scheduled and
running rows made by real jobs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from queuey import MemoryBackend, Producer, sync
from queuey.backends.postgres import PostgresBackend
from tests.integration.postgres.test_admin_cli import (
    UNKNOWN_ID,
    Land,
    OpsQueues,
    SendEmail,
    land,
)

pytestmark = pytest.mark.postgres
__all__ = ["land"]  # the fixture, used by name


async def test_jobs_show_a_failed_job_in_full(land: Land) -> None:
    result = await land.cli("jobs", "show", land.ids["bad1"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:10] == [
        f"id            {land.ids['bad1']}",
        "kind          job",
        "queue         ops.emails",
        "job type      ops.SendEmail",
        "state         failed",
        "attempts      1",
        "redeliveries  0",
        "deferrals     0",
        "priority      0",
        lines[9],
    ]
    assert lines[9].startswith("due at        ") and lines[9].endswith(" UTC")
    assert lines[10:21] == [
        "",
        "payload:",
        "{",
        '  "to": "bad1@example.com"',
        "}",
        "",
        "last error:",
        "  fatal error: bad1@example.com is not a mailbox [red]here[/red]",
        "  second line of the error",
        "",
        "attempt errors (1, oldest first; the latest 10 kept):",
    ]
    assert lines[21].startswith("  attempt 1 at 20") and " UTC on " in lines[21]
    assert lines[22:24] == [
        "    queuey.errors.Fatal: bad1@example.com is not a mailbox [red]here[/red]",
        "    second line of the error",
    ]
    assert lines[24] == "      Traceback (most recent call last):"
    assert "in send" in result.stdout  # the handler's frame
    assert lines[-2:] == [
        "      queuey.errors.Fatal: bad1@example.com is not a mailbox [red]here[/red]",
        "      second line of the error",
    ]


@pytest.mark.parametrize(
    ("label", "state"),
    [
        ("ok", "done"),
        ("running", "running"),
        ("due", "pending, due for 1m 3"),  # 90 s overdue, give or take the test's own time
        ("scheduled", "pending, scheduled: due in 59m"),
    ],
)
async def test_jobs_show_any_state(land: Land, label: str, state: str) -> None:
    result = await land.cli("jobs", "show", land.ids[label])
    assert result.exit_code == 0, result.output
    shown = dict(line.split(maxsplit=1) for line in result.stdout.splitlines()[:5])
    assert shown["state"].startswith(state), shown


async def test_jobs_show_json(land: Land) -> None:
    result = await land.cli("jobs", "show", land.ids["scheduled"], "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    due_at = datetime.fromisoformat(document.pop("due_at"))
    assert document == {
        "id": land.ids["scheduled"],
        "kind": "job",
        "queue": "ops.images",
        "job_type": "ops.Resize",
        "state": "pending",
        "attempts": 0,
        "redeliveries": 0,
        "deferrals": 0,
        "priority": 0,
        "last_error": None,
        "errors": [],
        "payload": {"size": 128},
        "progress": None,
        "result": None,
        "cancel_requested": False,
    }
    assert due_at.utcoffset() == timedelta(0)
    assert due_at > datetime.now(UTC) + timedelta(minutes=58)


async def test_jobs_show_an_unknown_job_exits_1(land: Land) -> None:
    result = await land.cli("jobs", "show", UNKNOWN_ID)
    assert result.exit_code == 1
    assert result.stderr == f"error: no job with id {UNKNOWN_ID} in schema {land.schema}\n"
    result = await land.cli("jobs", "show", "not-a-uuid")
    assert result.exit_code == 2


async def test_failed_show_of_a_job_that_is_not_failed_points_at_jobs_show(land: Land) -> None:
    result = await land.cli("failed", "show", land.ids["scheduled"])
    assert result.exit_code == 1
    assert f"`queuey jobs show {land.ids['scheduled']}` shows a job in any state" in (result.stderr)


@pytest.mark.parametrize(
    "argv",
    [
        ["failed", "list", "--queue", "emails"],
        ["failed", "retry", "--all", "--queue", "emails"],
        ["failed", "discard", "--all", "--queue", "emails"],
    ],
)
async def test_a_queue_that_does_not_exist_is_named_as_such(land: Land, argv: list[str]) -> None:
    result = await land.cli(*argv)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: no queue 'emails' in schema {land.schema}: no row of any state is on it "
        "(queues with live rows: ops.emails, ops.images, ops.reports, ops.slow)\n"
    )


async def test_a_queue_with_only_done_rows_exists(land: Land) -> None:
    async with await psycopg.AsyncConnection.connect(land.url, autocommit=True) as conn:
        await conn.execute(
            f"UPDATE \"{land.schema}\".queue_message SET queue = 'ops.quiet' WHERE id = %s",
            (land.ids["ok"],),
        )
    result = await land.cli("failed", "list", "--queue", "ops.quiet")
    assert (result.exit_code, result.stderr) == (1, "error: no failed rows on ops.quiet\n")


async def test_enqueue_with_a_sync_connection_says_what_it_takes(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(OpsQueues, backend)
        with psycopg.connect(database_url) as conn:
            with pytest.raises(TypeError) as caught:
                await producer.enqueue(SendEmail(to="a@b.c"), connection=conn)
        assert str(caught.value) == (
            "connection= takes the psycopg AsyncConnection whose transaction the job joins; got "
            "psycopg.Connection, a synchronous connection: enqueue through "
            "`queuey.sync.Producer` on `queuey.sync.PostgresBackend`, which takes it, or open an "
            "AsyncConnection with `await psycopg.AsyncConnection.connect(url)`"
        )
        with pytest.raises(TypeError, match=r"got builtins\.str$"):
            await producer.enqueue(SendEmail(to="a@b.c"), connection="postgresql://")
        assert await backend.count_pending("ops.emails") == 0


def test_the_sync_producer_looks_jobs_up_too(database_url: str, pg_schema: str) -> None:
    with sync.PostgresBackend.connect(database_url, schema=pg_schema) as backend:
        producer = sync.Producer.create(OpsQueues, backend)
        job_id = producer.enqueue_after(SendEmail(to="a@b.c"), "1h")
        found = producer.job(job_id)
        assert found is not None and (found.id, found.state, found.attempts) == (
            job_id,
            "pending",
            0,
        )
        assert found.due_at > datetime.now(UTC) + timedelta(minutes=59)
        assert producer.job(UNKNOWN_ID) is None
    with sync.ThreadedBackend(MemoryBackend()) as threaded:
        producer = sync.Producer.create(OpsQueues, threaded)
        found = producer.job(producer.enqueue(SendEmail(to="a@b.c")))
        assert found is not None and found.state == "pending"
