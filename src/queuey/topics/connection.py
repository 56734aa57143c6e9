"""What an app's topics need from their transport, read from its settings: the database URL's
sources, in order, and the backend options ``[queues]`` implies (``channel()``, ``poll_secs``,
``lease_secs``, ``retain_hours``, ``max_redeliveries``, ``publish_timeout_secs``).

The topic face depends on the backend contract only: the concrete backend is opened at the
edge (``queuey run``, ``queuey publish`` and ``queuey serve`` open a ``PostgresBackend`` with
these options).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from queuey.topics.config import QueuesConfig

__all__ = ["DATABASE_URL_ENV", "backend_options", "resolve_database_url"]

DATABASE_URL_ENV = "QUEUEY_DATABASE_URL"


def resolve_database_url(flag: str | None, env: str | None, file_url: str | None) -> str | None:
    """The first non-empty of: the ``--database-url`` flag, ``QUEUEY_DATABASE_URL``, and
    ``[database] url``; ``None`` when all are missing."""
    for url in (flag, env, file_url):
        if url and url.strip():
            return url.strip()
    return None


def backend_options(config: QueuesConfig) -> dict[str, Any]:
    """The ``PostgresBackend`` keyword options an app's ``[queues]`` settings imply: woken on
    ``channel()``, polling every ``poll_secs``, leases of ``lease_secs``, handled messages kept
    ``retain_hours`` (0: forever, ``retain=None``), ``max_redeliveries`` lost leases before
    a message is left failed, and publishes waiting ``publish_timeout_secs`` for the
    database."""
    retain = None if config.retain_hours == 0 else timedelta(hours=config.retain_hours)
    return {
        "channel": config.channel(),
        "poll_interval": timedelta(seconds=config.poll_secs),
        "lease": timedelta(seconds=config.lease_secs),
        "retain": retain,
        "max_redeliveries": config.max_redeliveries,
        "publish_timeout": timedelta(seconds=config.publish_timeout_secs),
    }
