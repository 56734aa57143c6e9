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
from psycopg.conninfo import conninfo_to_dict

from queuey.errors import BackendError, BackendUnavailableError
from queuey.secrets import redact

__all__ = [
    "DatabaseUnavailableError",
    "KeyTakenError",
    "RefusedError",
    "UndefinedTableError",
    "database_errors",
    "no_connection",
    "server_of",
    "translate",
]

_REFUSALS = (psycopg.DataError, psycopg.IntegrityError, psycopg.errors.RaiseException)


class DatabaseUnavailableError(BackendUnavailableError):
    """PostgreSQL could not be reached, or the connection broke: retrying may succeed (the
    public ``BackendUnavailableError``)."""


class RefusedError(BackendError, ValueError):
    """PostgreSQL refused the statement for the values it carries (a data exception, a
    constraint, a trigger): running it again fails the same way."""


class KeyTakenError(RefusedError):
    """A statement gave a row a unique key another row took meanwhile (a unique violation):
    run again, it sees that row."""


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
    if isinstance(exc, psycopg.errors.UniqueViolation):
        return KeyTakenError(text)
    if isinstance(exc, _REFUSALS):
        return RefusedError(text)
    return BackendError(text)


def server_of(conninfo: str) -> str:
    """``host:port`` of ``conninfo`` for messages (libpq's defaults when it names none; never
    its password)."""
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "(unparsable conninfo)"
    return f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}"


def no_connection(server: str, waited: float, *, busy: int = 0) -> DatabaseUnavailableError:
    """The error of a statement that found no connection to ``server`` within ``waited``
    seconds (``publish_timeout``): nothing was sent. ``busy``: the pool had that many
    connections, every one of them in use (so the database was reached, the pool was full)."""
    limit = f"{waited:g}s (publish_timeout)"
    if busy:
        why = f"every connection of the pool ({busy}) stayed busy for {limit}"
        return DatabaseUnavailableError(f"PostgreSQL at {server}: {why}; nothing was written")
    return DatabaseUnavailableError(
        f"PostgreSQL at {server} is unreachable: no connection after trying for {limit}; "
        "nothing was written"
    )


@contextmanager
def database_errors() -> Iterator[None]:
    """Re-raise database and socket errors raised inside as ``translate`` says, from nothing
    (the driver's exception, which may quote the connection string, is not chained)."""
    try:
        yield
    except (psycopg.Error, OSError) as exc:
        raise translate(exc) from None
