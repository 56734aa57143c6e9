"""The conformance suite's ``backend`` fixture, parametrized over every backend.

A case that needs a capability only some backends have checks it and skips elsewhere
(``backend.supports_transactions``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from queuey.backends.base import Backend
from queuey.backends.memory import MemoryBackend
from tests.conftest import fresh_schema

BACKENDS = ["memory", "postgres"]


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """A fresh, isolated backend of each kind."""
    kind = request.param
    if kind == "memory":
        memory = MemoryBackend()
        yield memory
        await memory.close()
        return
    if kind == "postgres":
        from queuey.backends.postgres import PostgresBackend

        database_url = request.getfixturevalue("database_url")
        async with fresh_schema(database_url) as schema:
            pg = await PostgresBackend.connect(
                database_url, schema=schema, poll_interval="1s", lease="30s"
            )
            yield pg
            await pg.close()
        return
    raise AssertionError(kind)
