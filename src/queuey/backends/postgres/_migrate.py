"""Versioned migrations (``queuey db migrate``).

Migrations run in one transaction under a transaction-level advisory lock keyed by the schema,
so two deploys migrating at once apply each migration exactly once. The statements are the
store's (``migrate_lock``, ``migrate_bookkeeping``, ``record_migration`` and the files of
``sql/migrations/``).
"""

from __future__ import annotations

from queuey.backends.postgres._sql import Statements, latest_version, migrations
from queuey.backends.postgres._store import Store

__all__ = ["LATEST_VERSION", "migrate"]

LATEST_VERSION = latest_version()
"""The number of the newest schema migration this version ships (``queuey db migrate``
brings a schema to it)."""


async def migrate(
    conninfo: str, *, schema: str = "queuey", table: str = "queue_message"
) -> list[str]:
    """Bring ``schema`` up to the latest version; returns the names of migrations applied.

    Safe to run concurrently (advisory lock) and repeatedly (applied versions are skipped).
    Every version not yet applied is applied, in order, also one numbered below the highest
    applied (so a migration that arrives after a later one is never skipped).

    Raises:
        ConfigError: ``schema`` or ``table`` is not a usable identifier.
        BackendError: the database cannot be reached or a migration failed (nothing applied).
    """
    store = Store(Statements(schema, table), conninfo)
    names: list[str] = []
    async with store.session(check_schema=False, transaction=True, connect_timeout=None) as db:
        await db.lock_migrations()
        await db.create_bookkeeping()
        done = await db.applied_versions()
        for migration in migrations():
            if migration.version not in done:
                await db.apply_migration(migration)
                names.append(migration.name)
    return names
