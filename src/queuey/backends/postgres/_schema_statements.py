"""The statements that read and migrate the schema (run in sessions): which migrations are
applied, the check that refuses a schema behind this queuey (``schema_error``), the migration
lock and applying one migration. Part of ``Store`` (``Store`` inherits them); run only through
it."""

from __future__ import annotations

from collections.abc import Collection

from psycopg.rows import scalar_row, tuple_row

from queuey.backends.postgres._errors import UndefinedTableError
from queuey.backends.postgres._sql import Migration, latest_version, migrations
from queuey.backends.postgres._statement_runner import StatementRunner
from queuey.errors import SchemaError

__all__ = ["SchemaStatements", "schema_error"]


class SchemaStatements(StatementRunner):
    """``Store``'s schema and migration statements (see the module)."""

    async def schema_version(self) -> int:
        """``schema_version``: the newest migration applied; 0 when there is none yet."""
        try:
            (version,) = await self._fetch("schema_version", None, scalar_row)
        except UndefinedTableError:
            return 0
        return int(version)

    async def applied_versions(self) -> set[int]:
        """``applied_versions``: every migration applied (empty when there is none yet)."""
        try:
            rows = await self._fetch("applied_versions", None, scalar_row)
        except UndefinedTableError:
            return set()
        return {int(version) for version in rows}

    async def check_schema(self) -> None:
        """Refuse a schema older than this queuey needs: one that lacks any migration of this
        version, also one numbered below the highest applied (added by a later release).

        Raises:
            SchemaError: the schema is missing or behind; the message says to migrate it.
        """
        error = schema_error(self.statements.schema, await self.applied_versions())
        if error is not None:
            raise error

    async def lock_migrations(self) -> None:
        """``migrate_lock``: hold the schema's migration lock until the transaction ends."""
        await self._count("migrate_lock", {"schema": self.statements.schema})

    async def create_bookkeeping(self) -> None:
        """``migrate_bookkeeping``: the schema and its migrations table, when missing."""
        await self._count("migrate_bookkeeping", None)

    async def apply_migration(self, migration: Migration) -> None:
        """Run ``migration`` (its own ``.sql`` file), then ``record_migration``."""
        await self._run(self.statements.migration(migration), None, tuple_row)
        params = {"version": migration.version, "name": migration.name}
        await self._count("record_migration", params)


def schema_error(schema: str, applied: Collection[int]) -> SchemaError | None:
    """The ``SchemaError`` of a schema with the migrations ``applied``: ``None`` when it has
    every migration of this version, else one saying to migrate it: that the schema does not
    exist when no migration is applied, else which are missing (also when a migration numbered
    below the highest applied is missing: added by a later release)."""
    missing = sorted(m.version for m in migrations() if m.version not in applied)
    if not missing:
        return None
    version, needed = max(applied, default=0), latest_version()
    if not applied:
        state = "does not exist (or holds no queuey tables)"
    elif version < needed:
        state = f"is at version {version}, this queuey needs {needed}"
    else:
        state = f"lacks migration {', '.join(map(str, missing))}"
    return SchemaError(f"schema {schema!r} {state}: run `queuey db migrate --schema {schema}`")
