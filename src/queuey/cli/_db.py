"""``queuey db migrate``: create or upgrade queuey's PostgreSQL schema."""

from __future__ import annotations

import click

from queuey.cli._options import DATABASE_URL, SCHEMA
from queuey.cli._root import main, require, run_async

__all__ = ["db", "db_migrate"]


@main.group()
def db() -> None:
    """Database schema commands."""


@db.command("migrate")
@DATABASE_URL
@SCHEMA
def db_migrate(database_url: str | None, schema: str) -> None:
    """Create or upgrade the schema (safe to run concurrently: takes an advisory lock)."""
    from queuey.backends.postgres import migrate

    url = require(database_url, "database url", "QUEUEY_DATABASE_URL")
    applied = run_async(migrate(url, schema=schema))
    click.echo(_migrated(schema, applied))


def _migrated(schema: str, applied: list[str]) -> str:
    """What ``db migrate`` did, in the version numbers a schema error names (numbers have gaps,
    so the count of applied migrations is not the version)."""
    from queuey.backends.postgres import LATEST_VERSION

    if not applied:
        return f"schema {schema!r}: already at version {LATEST_VERSION} (nothing to apply)"
    return (
        f"schema {schema!r}: now at version {LATEST_VERSION} "
        f"(applied {len(applied)} migration(s): {', '.join(applied)})"
    )
