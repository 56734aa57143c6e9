"""Shared fixtures: real servers (PostgreSQL, RabbitMQ) with per-test isolation.

A test that needs a server skips when it cannot be reached, except under ``CI=true`` where it
fails (a missing server in CI is a broken build, not a reason to skip).

A ``serial`` test restarts the machine's PostgreSQL or RabbitMQ (the one whose URL fixture it
uses). It runs only with permission: ``QUEUEY_TEST_RESTART_SERVERS=1`` (``.ci/run`` sets it),
or the server named in ``QUEUEY_TEST_STARTED_SERVERS`` (``scripts/services`` lists there the
servers it started itself). Without permission it skips, saying which variable to set; under
``CI=true`` it fails instead, so CI never drops it silently.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import hypothesis  # noqa: F401  (imported here, at a shallow stack; see below)
import pytest

# hypothesis's pytest plugin imports hypothesis lazily, at the end of a session that used no
# property test, from deep inside pytest's hooks; on CPython 3.11.7 the assertion rewriter's
# ast.parse then fails with "AST constructor recursion depth mismatch". Importing it early
# avoids that.

CI = os.environ.get("CI", "").lower() == "true"
DATABASE_URL = os.environ.get(
    "QUEUEY_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
AMQP_URL = os.environ.get("QUEUEY_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
RESTART_SERVERS = "QUEUEY_TEST_RESTART_SERVERS"
STARTED_SERVERS = "QUEUEY_TEST_STARTED_SERVERS"
_SERVER_OF_FIXTURE = {"database_url": "postgres", "amqp_url": "rabbitmq"}


def may_restart(server: str) -> bool:
    """Whether the tests may restart ``server`` ("postgres" or "rabbitmq") on this machine."""
    if os.environ.get(RESTART_SERVERS, "").strip().lower() in {"1", "true", "yes"}:
        return True
    started = os.environ.get(STARTED_SERVERS, "")
    return server in {name.strip() for name in started.split(",")}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Keep a ``serial`` test from restarting a server nobody allowed it to restart."""
    if item.get_closest_marker("serial") is None:
        return
    fixtures = getattr(item, "fixturenames", ())
    servers = [server for name, server in _SERVER_OF_FIXTURE.items() if name in fixtures]
    needed = servers or list(_SERVER_OF_FIXTURE.values())
    refused = [server for server in needed if not may_restart(server)]
    if refused:
        message = (
            f"restarts this machine's {' and '.join(refused)}: set {RESTART_SERVERS}=1 to allow "
            f"it (or let scripts/test start the server itself, listed in {STARTED_SERVERS})"
        )
        if CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def unavailable(what: str, error: BaseException) -> None:
    """Skip locally, fail under CI."""
    message = f"{what} is not reachable: {error}"
    if CI:
        pytest.fail(message)
    pytest.skip(message)


def unique(prefix: str) -> str:
    """A name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def database_url() -> str:
    """The test database URL; skips (or fails under CI) when PostgreSQL is down."""
    import psycopg

    try:
        with psycopg.connect(DATABASE_URL, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        unavailable("PostgreSQL", exc)
    return DATABASE_URL


@asynccontextmanager
async def fresh_schema(database_url: str) -> AsyncIterator[str]:
    """A fresh, migrated schema, dropped on exit."""
    import psycopg

    from queuey.backends.postgres import migrate

    schema = unique("t")
    await migrate(database_url, schema=schema)
    try:
        yield schema
    finally:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
async def pg_schema(database_url: str) -> AsyncIterator[str]:
    """A fresh, migrated schema for one test, dropped afterwards."""
    async with fresh_schema(database_url) as schema:
        yield schema


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """The test broker URL; skips (or fails under CI) when RabbitMQ is down."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(AMQP_URL)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5672), 5):
            pass
    except OSError as exc:
        unavailable("RabbitMQ", exc)
    return AMQP_URL


BackendFactory = Callable[..., Any]
