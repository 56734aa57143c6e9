"""Connection strings: redaction for messages, and mapping driver errors to ``BackendError``.

A DSN's password never reaches a log line or an error message.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from queuey.errors import BackendError
from queuey.secrets import redact, remember

__all__ = ["connection_errors", "redact"]


@contextmanager
def connection_errors(conninfo: str) -> Iterator[None]:
    """Re-raise psycopg errors as ``BackendError`` with the password redacted."""
    remember(conninfo)
    try:
        yield
    except psycopg.Error as exc:
        message = redact(str(exc).strip()) or type(exc).__name__
        raise BackendError(f"PostgreSQL: {message}") from None
    except OSError as exc:
        raise BackendError(f"PostgreSQL unreachable: {redact(str(exc))}") from None
