"""Connecting an app's topics to PostgreSQL: the database URL's sources, in order, and the
backend built from ``[queues]`` (``poll_secs``, ``lease_secs``, ``retain_hours``).
"""

from __future__ import annotations

from datetime import timedelta

from queuey.backends.base import Backend
from queuey.topics.config import QueuesConfig

__all__ = ["DATABASE_URL_ENV", "connect_backend", "resolve_database_url"]

DATABASE_URL_ENV = "QUEUEY_DATABASE_URL"


def resolve_database_url(flag: str | None, env: str | None, file_url: str | None) -> str | None:
    """The first non-empty of: the ``--database-url`` flag, ``QUEUEY_DATABASE_URL``, and
    ``[database] url``; ``None`` when all are missing."""
    for url in (flag, env, file_url):
        if url and url.strip():
            return url.strip()
    return None


async def connect_backend(
    config: QueuesConfig, url: str, *, schema: str = "queuey", migrate: bool = False
) -> Backend:
    """A ``PostgresBackend`` for an app: woken on ``channel()``, polling every ``poll_secs``,
    leases of ``lease_secs``, handled messages kept ``retain_hours`` (0: forever).

    Args:
        config: the app's ``[queues]`` settings.
        url: the PostgreSQL URL.
        schema: the PostgreSQL schema holding queuey's table.
        migrate: create or upgrade the schema first.

    Raises:
        BackendError: the database cannot be reached.
        SchemaError: the schema is older than this version needs (with ``migrate=False``).
    """
    from queuey.backends.postgres import PostgresBackend

    retain = None if config.retain_hours == 0 else timedelta(hours=config.retain_hours)
    backend: Backend = await PostgresBackend.connect(
        url,
        schema=schema,
        channel=config.channel(),
        poll_interval=timedelta(seconds=config.poll_secs),
        lease=timedelta(seconds=config.lease_secs),
        retain=retain,
        migrate=migrate,
    )
    return backend
