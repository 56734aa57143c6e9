"""The backend's one error policy: every psycopg or socket error becomes a ``BackendError``
whose message has every remembered password masked, and no driver exception escapes.

Private subclasses tell callers what they may do about a failure, without a second policy:

- ``DatabaseUnavailableError``: transient. The connection was refused, lost or timed out, or
  the server gave up on the statement for reasons of its own (``OperationalError``: SQLSTATE
  classes 08, 40 serialization/deadlock, 53, 55, 57, 58): the same statement may succeed on a
  fresh connection, so statements that must land are retried.
- ``RefusedError``: for good. The database refused the statement for the values it carries: a
  data exception (class 22, e.g. "timestamp out of range"), an integrity constraint (class 23,
  a ``CHECK``), or a trigger that raised (P0001). Running it again fails the same way, so it is
  never retried; it is also a ``ValueError``, which is how the runtime, which knows no backend,
  recognises an outcome that can never be recorded (``_runtime.settle.refused``).
- ``UndefinedTableError``: the schema is missing (the start-up check reports it as a
  ``SchemaError``).

Each keeps the message a plain ``BackendError`` would have.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from queuey.errors import BackendError
from queuey.secrets import redact

__all__ = [
    "DatabaseUnavailableError",
    "RefusedError",
    "UndefinedTableError",
    "database_errors",
    "translate",
]

_REFUSALS = (psycopg.DataError, psycopg.IntegrityError, psycopg.errors.RaiseException)


class DatabaseUnavailableError(BackendError):
    """PostgreSQL could not be reached, or the connection broke: retrying may succeed."""


class RefusedError(BackendError, ValueError):
    """PostgreSQL refused the statement for the values it carries (a data exception, a
    constraint, a trigger): running it again fails the same way."""


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
    if isinstance(exc, _REFUSALS):
        return RefusedError(text)
    return BackendError(text)


@contextmanager
def database_errors() -> Iterator[None]:
    """Re-raise database and socket errors raised inside as ``translate`` says, from nothing
    (the driver's exception, which may quote the connection string, is not chained)."""
    try:
        yield
    except (psycopg.Error, OSError) as exc:
        raise translate(exc) from None
