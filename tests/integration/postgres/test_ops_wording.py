"""What operators read: ``db migrate`` speaks in the schema versions a schema error names."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from click.testing import CliRunner

from queuey.backends.postgres import LATEST_VERSION
from queuey.cli import main
from tests.conftest import unique

pytestmark = pytest.mark.postgres


async def test_migrate_names_the_version_reached_not_only_a_count(database_url: str) -> None:
    schema = unique("t")
    args = ["db", "migrate", "--database-url", database_url, "--schema", schema]
    try:
        first = await asyncio.to_thread(CliRunner().invoke, main, args)
        assert first.exit_code == 0, first.output
        line = first.stdout.strip()
        reached = f"schema {schema!r}: now at version {LATEST_VERSION} (applied "
        assert line.startswith(reached), line
        assert "0001" in line and "migration(s)" in line
        again = await asyncio.to_thread(CliRunner().invoke, main, args)
        assert again.stdout.strip() == (
            f"schema {schema!r}: already at version {LATEST_VERSION} (nothing to apply)"
        )
    finally:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
