"""The PostgreSQL error policy tells a refusal (the statement's values: a data exception, a
constraint, a trigger) from a lost connection: a refusal is a ``RefusedError`` (also a
``ValueError``, which the runtime reads as "never recordable") and is never retried; a lost
connection is retried (kept until the database answers again)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import psycopg
import pytest

from queuey import BackendError
from queuey._runtime.settle import refused
from queuey.backends.postgres._complete import Completer
from queuey.backends.postgres._errors import (
    DatabaseUnavailableError,
    RefusedError,
    translate,
)


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.DatetimeFieldOverflow("timestamp out of range"),
        psycopg.errors.NumericValueOutOfRange("integer out of range"),
        psycopg.errors.CheckViolation('violates check constraint "x"'),
        psycopg.errors.NotNullViolation("null value"),
        psycopg.errors.RaiseException("refused by a trigger"),
    ],
)
def test_a_statement_refused_for_its_values_is_a_refusal(error: psycopg.Error) -> None:
    translated = translate(error)
    assert isinstance(translated, RefusedError) and isinstance(translated, BackendError)
    assert refused(translated)
    assert str(translated) == f"PostgreSQL: {error}"


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError("server closed the connection"),
        psycopg.errors.SerializationFailure("could not serialize"),
        psycopg.errors.DeadlockDetected("deadlock"),
        psycopg.errors.QueryCanceled("statement timeout"),
        ConnectionResetError("reset"),
    ],
)
def test_a_lost_connection_or_a_transient_refusal_is_not(error: Exception) -> None:
    assert isinstance(error, psycopg.Error | OSError)
    translated = translate(error)
    assert isinstance(translated, DatabaseUnavailableError) and not refused(translated)


class FlakyStore:
    """A store whose ``reschedule`` fails with ``errors`` in turn, then records (its sessions
    are itself: the recovery of a kept outcome runs on one)."""

    owner = "me"
    lease = 30.0

    def __init__(self, *errors: BackendError) -> None:
        self.errors = list(errors)
        self.calls = 0

    @contextlib.asynccontextmanager
    async def session(self, **options: object) -> AsyncIterator[FlakyStore]:
        yield self

    async def extend(self, ids: set[str]) -> set[str]:
        return ids

    async def reschedule(self, *args: object, **kwargs: object) -> tuple[bool, str | None]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return True, None  # recorded, not superseded


async def test_a_refused_settle_is_not_retried() -> None:
    store = FlakyStore(RefusedError("PostgreSQL: timestamp out of range"))
    completer = Completer(store)  # type: ignore[arg-type]
    completer.hold(["r"])
    with pytest.raises(RefusedError, match="timestamp out of range"):
        await completer.reschedule(
            "r", 1, next_attempts=1, deferrals=0, priority=0, delay=1e20, ttl=None, error="e"
        )
    assert store.calls == 1 and completer.held == set()


async def test_a_settle_on_a_lost_connection_is_retried() -> None:
    store = FlakyStore(DatabaseUnavailableError("PostgreSQL unreachable: reset"))
    completer = Completer(store)  # type: ignore[arg-type]
    await completer.reschedule(
        "r", 1, next_attempts=1, deferrals=0, priority=0, delay=1, ttl=None, error="e"
    )
    assert store.calls == 2
