"""PostgreSQL array literals built in one string join.

psycopg adapts a Python list element by element in Python (about 2 µs per element), which made
list parameters the largest client cost of a bulk publish and of a batch ack. The statements
instead take each array as one text parameter in PostgreSQL's array syntax, cast in SQL
(``%(ids)s::uuid[]``); the server parses it. Elements are always double-quoted, with ``\\`` and
``"`` escaped, so any text survives; ``None`` becomes an unquoted ``NULL``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["nullable_text_array", "number_array", "text_array"]


def _quote(value: str) -> str:
    if "\\" in value or '"' in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{value}"'


def text_array(values: Iterable[str]) -> str:
    """``["a", 'b"c']`` → ``{"a","b\\"c"}`` (for ``text[]``, ``uuid[]``, ``json[]`` casts)."""
    return "{" + ",".join([_quote(v) for v in values]) + "}"


def nullable_text_array(values: Iterable[str | None]) -> str:
    """``["a", None]`` → ``{"a",NULL}``."""
    return "{" + ",".join(["NULL" if v is None else _quote(v) for v in values]) + "}"


def number_array(values: Iterable[int | float | None]) -> str:
    """``[1, None, 2.5]`` → ``{1,NULL,2.5}`` (for ``int[]``, ``bigint[]``, ``float8[]`` casts)."""
    return "{" + ",".join(["NULL" if v is None else repr(v) for v in values]) + "}"
