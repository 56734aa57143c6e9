"""``Recovery`` keeps the settles that could not reach the database and writes them once it
answers, renewing the leases first; it gives up when the lease may have expired, keeps at most
``MAX_KEPT``, drops a cancelled waiter's statement and fails the rest on close. A store fake
that can be "down" stands for the database here; ``tests/integration/postgres/test_outage_jobs.py``
cuts a real connection."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import cast

import pytest

from queuey.backends.postgres import _recovery
from queuey.backends.postgres._errors import DatabaseUnavailableError, RefusedError
from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._recovery import Recovery


class Database:
    """What the fake stores share: whether the database answers, and what ran where."""

    def __init__(self) -> None:
        self.up = False
        self.log: list[str] = []


class FakeStore:
    """The two statements ``Recovery`` runs (``extend`` and a settle, ``record``), on the pool
    (``where="pool"``) or on a session of its own."""

    owner = "me"

    def __init__(self, db: Database, where: str = "pool") -> None:
        self.db = db
        self.where = where

    def _check(self) -> None:
        if not self.db.up:
            raise DatabaseUnavailableError("PostgreSQL unreachable: connection refused")

    @contextlib.asynccontextmanager
    async def session(self, **options: object) -> AsyncIterator[FakeStore]:
        self._check()
        yield FakeStore(self.db, "session")

    async def extend(self, ids: set[str]) -> dict[str, bool]:
        self._check()
        self.db.log.append(f"{self.where}: extend {sorted(ids)}")
        return {row_id: row_id == "cancelled" for row_id in ids - {"stolen"}}

    async def record(self, what: str) -> str:
        self._check()
        self.db.log.append(f"{self.where}: {what}")
        if what == "refused":
            raise RefusedError("PostgreSQL: timestamp out of range")
        return what


def recovery(db: Database, lease: float = 30.0) -> tuple[Recovery, list[str]]:
    """A recovery over ``db`` and what it told: ``lost: <id>`` and ``cancel: <id>``."""
    told: list[str] = []
    keeper = Recovery(
        FakeStore(db),  # type: ignore[arg-type]
        lease,
        Outage("PostgreSQL"),
        lambda ids, sent: told.extend(f"lost: {i}" for i in sorted(ids)),
        lambda ids: told.extend(f"cancel: {i}" for i in sorted(ids)),
    )
    return keeper, told


def record(what: str) -> _recovery.Statement[str]:
    """The settle statement ``what`` (on whichever store it is given)."""
    return lambda store: cast(FakeStore, store).record(what)


@pytest.fixture(autouse=True)
def fast_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_recovery, "PROBE_SECS", 0.01)


async def test_kept_outcomes_land_in_order_once_back_after_the_leases() -> None:
    db = Database()
    keeper, told = recovery(db)
    keeper.held.update({"a", "b", "cancelled", "stolen"})
    first = asyncio.create_task(keeper.landed(record("ack a")))
    second = asyncio.create_task(keeper.landed(record("retry b")))
    await asyncio.sleep(0.1)
    assert not first.done() and not second.done() and keeper.kept == 2 and db.log == []
    db.up = True
    assert await first == "ack a" and await second == "retry b"
    assert db.log == [
        "session: extend ['a', 'b', 'cancelled', 'stolen']",
        "session: ack a",
        "session: retry b",
    ]
    assert told == ["lost: stolen", "cancel: cancelled"] and keeper.kept == 0 and not keeper.owed
    await keeper.close()


async def test_a_statement_that_reaches_the_database_is_not_kept() -> None:
    db = Database()
    db.up = True
    keeper, _ = recovery(db)
    assert await keeper.landed(record("ack")) == "ack"
    assert db.log == ["pool: ack"] and not keeper.owed


async def test_a_kept_outcome_the_database_refuses_fails_with_its_refusal() -> None:
    db = Database()
    keeper, _ = recovery(db)
    refused = asyncio.create_task(keeper.landed(record("refused")))
    after = asyncio.create_task(keeper.landed(record("ack")))
    await asyncio.sleep(0.05)
    db.up = True
    with pytest.raises(RefusedError):
        await refused
    assert await after == "ack"
    await keeper.close()


async def test_an_outage_longer_than_the_lease_gives_the_outcome_up() -> None:
    db = Database()
    keeper, _ = recovery(db, lease=0.5)
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailableError, match=r"lease of 0.5s may have expired"):
        await keeper.landed(record("ack"))
    assert 0.3 < time.monotonic() - started < 3.0
    assert keeper.kept == 0
    db.up = True
    await asyncio.sleep(0.1)
    assert db.log == []  # never written after it was given up
    await keeper.close()


async def test_a_renewal_moves_the_deadline_on() -> None:
    db = Database()
    keeper, _ = recovery(db, lease=0.6)
    keeper.held.add("a")
    kept = asyncio.create_task(keeper.landed(record("ack")))
    for _ in range(4):  # 1.2 s in all, twice the lease, renewed every 0.3 s
        await asyncio.sleep(0.3)
        keeper.renewed(time.monotonic())
    assert not kept.done()
    db.up = True
    assert await kept == "ack"
    await keeper.close()


async def test_at_most_max_kept_statements_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_recovery, "MAX_KEPT", 1)
    db = Database()
    keeper, _ = recovery(db)
    kept = asyncio.create_task(keeper.landed(record("first")))
    await asyncio.sleep(0.05)
    with pytest.raises(DatabaseUnavailableError, match="connection refused"):
        await keeper.landed(record("second"))
    db.up = True
    assert await kept == "first"
    assert db.log == ["session: first"]
    await keeper.close()


async def test_a_cancelled_waiter_drops_its_statement() -> None:
    db = Database()
    keeper, _ = recovery(db)
    kept = asyncio.create_task(keeper.landed(record("ack")))
    await asyncio.sleep(0.05)
    kept.cancel()
    with pytest.raises(asyncio.CancelledError):
        await kept
    assert keeper.kept == 0
    db.up = True
    await asyncio.sleep(0.1)
    assert db.log == []
    await keeper.close()


async def test_a_failed_heartbeat_renews_as_soon_as_the_database_answers() -> None:
    db = Database()
    keeper, _ = recovery(db)
    keeper.held.add("a")
    before = keeper.renewed_at
    keeper.renewal_failed()
    await asyncio.sleep(0.1)
    assert keeper.owed and db.log == []
    db.up = True
    async with asyncio.timeout(2):
        while keeper.owed:
            await asyncio.sleep(0.01)
    assert db.log == ["session: extend ['a']"] and keeper.renewed_at > before
    await keeper.close()


async def test_close_fails_what_is_kept() -> None:
    db = Database()
    keeper, _ = recovery(db)
    kept = asyncio.create_task(keeper.landed(record("ack")))
    await asyncio.sleep(0.05)
    await keeper.close()
    with pytest.raises(DatabaseUnavailableError, match="backend closed"):
        await kept
    with pytest.raises(DatabaseUnavailableError, match="connection refused"):
        await keeper.landed(record("late"))  # closed: nothing more is kept
