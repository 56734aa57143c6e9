"""Versioned migrations (``queuey db migrate``) and the start-up schema check.

Migrations run in one transaction under a transaction-level advisory lock keyed by the schema,
so two deploys migrating at once apply each migration exactly once.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from queuey.backends.postgres._conninfo import connection_errors
from queuey.backends.postgres._sql import Statements, migrations
from queuey.errors import SchemaError

__all__ = ["LATEST_VERSION", "check_schema", "migrate"]

LATEST_VERSION = max(m.version for m in migrations())
_LOCK = "SELECT pg_advisory_xact_lock(hashtext('queuey.migrate.' || %s))"
_BOOKKEEPING = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {migrations} (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


async def migrate(
    conninfo: str, *, schema: str = "queuey", table: str = "queue_message"
) -> list[str]:
    """Bring ``schema`` up to the latest version; returns the names of migrations applied.

    Safe to run concurrently (advisory lock) and repeatedly (applied versions are skipped).

    Raises:
        ConfigError: ``schema`` or ``table`` is not a usable identifier.
        BackendError: the database cannot be reached or a migration failed (nothing applied).
    """
    statements = Statements(schema, table)
    with connection_errors(conninfo):
        async with await psycopg.AsyncConnection.connect(conninfo) as conn:
            async with conn.transaction():
                await conn.execute(_LOCK, (schema,))
                await conn.execute(
                    sql.SQL(_BOOKKEEPING).format(
                        schema=sql.Identifier(schema), migrations=statements.names["migrations"]
                    )
                )
                current = await _version(conn, statements)
                return [
                    await _apply(conn, statements, m) for m in migrations() if m.version > current
                ]


async def _version(conn: psycopg.AsyncConnection[object], statements: Statements) -> int:
    cursor = await conn.execute(statements["schema_version"])
    row = await cursor.fetchone()
    return int(row[0]) if row else 0  # type: ignore[index]


async def _apply(
    conn: psycopg.AsyncConnection[object], statements: Statements, migration: object
) -> str:
    from queuey.backends.postgres._sql import Migration

    assert isinstance(migration, Migration)
    await conn.execute(statements.migration(migration))
    await conn.execute(
        sql.SQL("INSERT INTO {} (version, name) VALUES (%s, %s)").format(
            statements.names["migrations"]
        ),
        (migration.version, migration.name),
    )
    return migration.name


async def check_schema(conn: psycopg.AsyncConnection[object], statements: Statements) -> None:
    """Refuse to start against a schema older than this version needs.

    Raises:
        SchemaError: the schema is missing or behind; the message says to run the migration.
    """
    try:
        async with conn.transaction():
            version = await _version(conn, statements)
    except psycopg.errors.UndefinedTable:
        version = 0
    if version < LATEST_VERSION:
        raise SchemaError(
            f"schema {statements.schema!r} is at version {version}, this queuey needs "
            f"{LATEST_VERSION}: run `queuey db migrate --schema {statements.schema}`"
        )
