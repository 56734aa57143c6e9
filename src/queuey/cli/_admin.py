"""The ``Admin`` through which the commands on a live database (``status``, ``failed``,
``jobs``, ``queues``, ``schedules``, ``workflows``) act, built from their ``--database-url``
and ``--schema``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from queuey.cli._root import one_line, require
from queuey.errors import QueueyError

if TYPE_CHECKING:
    from queuey.backends.postgres import Admin

__all__ = ["admin_for"]


def admin_for(database_url: str | None, schema: str) -> Admin:
    """An ``Admin`` for the URL and schema (not connected yet).

    Raises:
        click.UsageError: no URL, a malformed one, or a bad schema name (exit 2, one line).
    """
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    from queuey.backends.postgres import Admin, redact

    url = require(database_url, "database url", "QUEUEY_DATABASE_URL")
    try:
        conninfo_to_dict(url)
    except ProgrammingError as exc:
        raise click.UsageError(f"malformed database url: {one_line(redact(str(exc)))}") from None
    try:
        return Admin(url, schema=schema)
    except QueueyError as exc:
        raise click.UsageError(str(exc)) from None
