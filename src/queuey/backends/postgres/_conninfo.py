"""Connection strings: redaction for messages, and mapping driver errors to ``BackendError``.

A DSN's password never reaches a log line or an error message.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from queuey.errors import BackendError

__all__ = ["connection_errors", "redact"]

_URL_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with any DSN password replaced by ``***`` (URL or key=value form)."""
    return _KV_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))


@contextmanager
def connection_errors(conninfo: str) -> Iterator[None]:
    """Re-raise psycopg errors as ``BackendError`` with the password redacted."""
    try:
        yield
    except psycopg.Error as exc:
        message = redact(str(exc).strip()) or type(exc).__name__
        raise BackendError(f"PostgreSQL: {message}") from None
    except OSError as exc:
        raise BackendError(f"PostgreSQL unreachable: {redact(str(exc))}") from None
