"""The backend's one error policy: every psycopg or socket error becomes a ``BackendError``
whose message has every remembered password masked, and no driver exception escapes.

Two private subclasses tell callers what they may do about a failure, without a second policy:
``DatabaseUnavailableError`` (the connection was refused, lost or timed out: the same
statement may succeed on a fresh connection, so statements that must land are retried) and
``UndefinedTableError`` (the schema is missing: the start-up check reports it as a
``SchemaError``). Both keep the message a plain ``BackendError`` would have.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from queuey.errors import BackendError
from queuey.secrets import redact

__all__ = ["DatabaseUnavailableError", "UndefinedTableError", "database_errors", "translate"]


class DatabaseUnavailableError(BackendError):
    """PostgreSQL could not be reached, or the connection broke: retrying may succeed."""


class UndefinedTableError(BackendError):
    """A statement named a table that does not exist (the schema is not migrated)."""


def translate(exc: psycopg.Error | OSError) -> BackendError:
    """The ``BackendError`` standing for a driver or socket error (``TimeoutError`` is an
    ``OSError``): "PostgreSQL: <message>" or "PostgreSQL unreachable: <message>"."""
    if isinstance(exc, OSError):
        detail = redact(str(exc).strip()) or type(exc).__name__
        return DatabaseUnavailableError(f"PostgreSQL unreachable: {detail}")
    text = f"PostgreSQL: {redact(str(exc).strip()) or type(exc).__name__}"
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseUnavailableError(text)
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return UndefinedTableError(text)
    return BackendError(text)


@contextmanager
def database_errors() -> Iterator[None]:
    """Re-raise database and socket errors raised inside as ``translate`` says, from nothing
    (the driver's exception, which may quote the connection string, is not chained)."""
    try:
        yield
    except (psycopg.Error, OSError) as exc:
        raise translate(exc) from None
