"""The one cut for recorded failure texts (error messages, dead-letter reasons, tracebacks):
storable in a PostgreSQL ``text`` column, a JSON document and an AMQP header alike.

A text is made storable by dropping NUL characters and replacing unpaired surrogates by ``?``;
a long one is cut in UTF-8 bytes (never characters: a multi-byte text is as bounded as an
ASCII one), on a character boundary, with ``…`` (3 bytes) marking the cut.
"""

from __future__ import annotations

__all__ = ["MAX_TEXT_BYTES", "clean_tail", "clean_text"]

MAX_TEXT_BYTES = 4000
"""Error texts and reasons are kept to this many UTF-8 bytes."""


def _storable(text: str) -> bytes:
    return text.replace("\x00", "").encode("utf-8", errors="replace")


def clean_text(text: str, limit: int = MAX_TEXT_BYTES) -> str:
    """``text`` made storable, its first ``limit`` UTF-8 bytes kept, ``…`` appended when cut
    (so at most ``limit`` + 3 bytes). Cutting twice changes nothing more."""
    data = _storable(text)
    if len(data) <= limit:
        return data.decode("utf-8")
    return data[:limit].decode("utf-8", errors="ignore") + "…"


def clean_tail(text: str, limit: int) -> str:
    """``text`` made storable, its last ``limit`` UTF-8 bytes kept, ``…`` prepended when cut
    (a traceback's end is where the error was raised)."""
    data = _storable(text)
    if len(data) <= limit:
        return data.decode("utf-8")
    return "…" + data[-limit:].decode("utf-8", errors="ignore")
