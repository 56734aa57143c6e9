"""The PostgreSQL store's pieces that need no database: rows decoded by column name, the one
error policy, storable texts, the waker, outages, and option validation."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import psycopg._queries as psycopg_queries
import pytest

from queuey.backends.postgres import PostgresBackend
from queuey.backends.postgres._errors import (
    DatabaseUnavailableError,
    UndefinedTableError,
    translate,
)
from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._rows import Claim, DeadRow, claim_rows, json_value
from queuey.backends.postgres._sql import Statements
from queuey.backends.postgres._wake import Waker
from queuey.errors import BackendError, ConfigError
from queuey.queues import QueueConfig
from queuey.secrets import remember


@dataclass
class Column:
    name: str


class FakeCursor:
    """What a row factory reads of a cursor: the result's column names."""

    def __init__(self, names: Sequence[str] | None) -> None:
        self.description = None if names is None else [Column(n) for n in names]


CLAIM = {
    "id": "00000000-0000-4000-8000-000000000001",
    "job_type": "shop.Send",
    "attempts": 0,
    "deferrals": 2,
    "priority": 7,
    "payload": '{"to": "a@b.c"}',
    "headers": '{"traceparent": "00-x"}',
    "published_by": "user-1",
    "enqueued_at_ms": 1_700_000_000_000,
    "position": 3,
    "redeliveries": 1,
    "waited": 0.25,
    "due_in": None,
    "held_concurrency": None,
    "held_rate": None,
    "overridden": False,
}


def claim(names: Sequence[str], config: QueueConfig) -> Claim:
    make = claim_rows(config)(FakeCursor(names))  # type: ignore[arg-type]
    row, due, held = make([CLAIM[name] for name in names])
    assert row is not None and due is None and held == (None, None, False)
    return row


def test_the_row_of_a_claim_that_took_nothing_carries_only_the_due_time() -> None:
    names = list(CLAIM)
    make = claim_rows(QueueConfig("q"))(FakeCursor(names))  # type: ignore[arg-type]
    values = {name: None for name in names} | {"due_in": 2.5}
    values["overridden"] = False
    assert make([values[name] for name in names]) == (None, 2.5, (None, None, False))


def test_a_limited_claim_row_carries_what_its_limits_held_back() -> None:
    names = list(CLAIM)
    make = claim_rows(QueueConfig("q"))(FakeCursor(names))  # type: ignore[arg-type]
    values = {name: None for name in names} | {"due_in": 0.2, "held_concurrency": 2, "held_rate": 0}
    values["overridden"] = True  # limits set at run time
    assert make([values[name] for name in names]) == (None, 0.2, (2, 0, True))


@pytest.mark.parametrize("order", [list(CLAIM), sorted(CLAIM), list(reversed(CLAIM))])
def test_a_claimed_row_is_decoded_by_column_name(order: list[str]) -> None:
    row = claim(order, QueueConfig("shop.emails", kind="topic"))
    envelope = row.envelope
    assert (row.position, row.row_id, row.suspect, row.waited) == (3, CLAIM["id"], True, 0.25)
    assert (envelope.queue, envelope.kind, envelope.job_type) == (
        "shop.emails",
        "topic",
        "shop.Send",
    )
    assert (envelope.attempt, envelope.deferrals, envelope.priority) == (1, 2, 7)
    assert envelope.headers == {"traceparent": "00-x", "published_by": "user-1"}
    assert (envelope.payload, envelope.redeliveries) == ({"to": "a@b.c"}, 1)


def test_a_claim_result_lacking_a_column_is_refused_by_name() -> None:
    factory = claim_rows(QueueConfig("q"))
    with pytest.raises(psycopg.ProgrammingError, match="position"):
        factory(FakeCursor([n for n in CLAIM if n != "position"]))  # type: ignore[arg-type]
    with pytest.raises(psycopg.InterfaceError):
        factory(FakeCursor(None))([])  # type: ignore[arg-type]


def test_a_dead_row_gives_back_its_envelope() -> None:
    row = DeadRow(
        id=str(CLAIM["id"]),
        job_type="shop.Send",
        attempts=3,
        deferrals=0,
        priority=0,
        payload={},
        headers={"a": "b"},
        published_by="",
        enqueued_at_ms=5,
        reason="boom",
    )
    envelope = row.envelope("job", "shop.emails")
    assert (envelope.attempt, envelope.headers, envelope.queue) == (3, {"a": "b"}, "shop.emails")


def test_driver_errors_become_backend_errors_without_the_password() -> None:
    remember("postgresql://u:pw-s3cret@h/db")
    lost = translate(psycopg.OperationalError("server closed: pw-s3cret"))
    assert isinstance(lost, DatabaseUnavailableError)
    assert str(lost) == "PostgreSQL: server closed: ***"
    unreachable = translate(ConnectionRefusedError("refused"))
    assert isinstance(unreachable, DatabaseUnavailableError)
    assert str(unreachable) == "PostgreSQL unreachable: refused"
    assert str(translate(TimeoutError())) == "PostgreSQL unreachable: TimeoutError"
    assert isinstance(translate(psycopg.errors.UndefinedTable("nope")), UndefinedTableError)
    refused = translate(psycopg.errors.SyntaxError("bad"))
    assert type(refused) is BackendError and str(refused) == "PostgreSQL: bad"


class Poked:
    def __init__(self) -> None:
        self.pokes = 0

    def poke(self) -> None:
        self.pokes += 1


def test_a_notification_wakes_only_the_consumers_of_its_queue() -> None:
    waker = Waker()
    first, second, other = Poked(), Poked(), Poked()
    waker.add("q", first)
    waker.add("q", second)
    waker.add("other", other)
    waker.notified("q")
    waker.notified("unknown")
    waker.remove("q", second)
    waker.remove("q", second)
    waker.notified("q")
    assert (first.pokes, second.pokes, other.pokes) == (2, 1, 0)
    waker.wake_all()
    assert (first.pokes, second.pokes, other.pokes) == (3, 1, 1)


async def test_an_outage_is_logged_once_and_its_end_wakes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="queuey.postgres")
    woken: list[bool] = []
    outage = Outage("PostgreSQL", lambda: woken.append(True))

    async def failing() -> int:
        raise DatabaseUnavailableError("PostgreSQL unreachable: refused")

    async def working() -> int:
        return 7

    assert [await outage.attempt(failing()) for _ in range(3)] == [None, None, None]
    assert await outage.attempt(working()) == 7
    assert await outage.attempt(working()) == 7
    assert woken == [True]
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_redeliveries": 0}, "max_redeliveries: expected an integer >= 1, got 0"),
        ({"pool_size": True}, "pool_size: expected an integer >= 1, got True"),
        ({"poll_only": "yes"}, "poll_only: expected true or false, got 'yes'"),
        ({"lease": 0}, "lease: a duration must be greater than zero"),
        ({"channel": "no-dash"}, "channel: 'no-dash' is not a usable identifier"),
    ],
)
async def test_backend_options_are_checked_by_name(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PostgresBackend("postgresql://localhost/none", **options)


async def test_a_cancellation_turned_into_a_database_error_still_cancels_the_loop() -> None:
    """psycopg may answer a task's cancellation with a cancelled-query error: the background
    loop's ``attempt`` must let the cancellation win, or ``close`` waits on it forever."""
    outage = Outage("PostgreSQL", lambda: None)
    entered = asyncio.Event()

    async def statement() -> None:
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise BackendError("PostgreSQL: canceling statement due to user request") from None

    async def loop() -> None:
        while True:
            await outage.attempt(statement())
            await asyncio.sleep(0.01)

    task = asyncio.create_task(loop())
    await entered.wait()
    task.cancel()
    await asyncio.wait({task}, timeout=5)
    stopped = task.done()
    if not stopped:
        task.cancel()  # the test's own clean-up; the assertion below has already failed
    assert stopped and task.cancelled()


@pytest.mark.parametrize(
    "text",
    [
        '{"t": 1733050000.123456, "n": 123456789012345678901234567890}',
        '{"a": [1, 2.5, null, true, {"b": "é\\n\\u00e9"}], "a": "last wins"}',
        '"\\ud800 alone"',  # refused by the fast parser: json.loads decodes it
        "1e400",
    ],
)
def test_claimed_json_decodes_as_the_standard_library_does(text: str) -> None:
    assert json_value(text) == json.loads(text)


def test_statements_are_rendered_once_without_their_comments() -> None:
    """Each statement is sent as text rendered once: quoted identifiers, no comment lines but
    the one naming it, and short enough for psycopg to cache the parsing of its placeholders
    (statements of 4,096 bytes or more are parsed again on every execution). The size bound is
    for the statements run per job; the sweep's ``reclaim`` runs once per sweep, where a parse
    (about 60 µs) does not count."""
    statements = Statements("bench_x", "queue_message")
    for name in ("claim", "ack", "ack_results", "publish_job", "publish", "reclaim"):
        text = statements[name].as_string(None)
        lines = text.splitlines()
        assert lines[0] == f"-- queuey: {name}"
        assert not [line for line in lines[1:] if line.lstrip().startswith("--")]
        assert '"bench_x"."queue_message"' in text and "{table}" not in text
        if name != "reclaim":
            assert len(text.encode()) < psycopg_queries.MAX_CACHED_STATEMENT_LENGTH, name
