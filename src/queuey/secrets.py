"""Keeping credentials out of messages and logs.

Every connection string queuey is given is remembered (``remember``); ``redact`` then masks its
password wherever it appears, whole or in pieces (a password holding ``@`` is split by a driver
that misreads the URL, and the piece after the ``@`` would otherwise show up in its error as a
host name), besides masking anything shaped like a password in a URL or a ``password=`` pair.
``RedactingFilter`` applies the same to every log record, third-party drivers' included.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote

__all__ = ["RedactingFilter", "redact", "remember"]

_MASK = "***"
_URL_PASSWORD = re.compile(r"(://[^:/@\s'\"]*:)\S*@")  # greedy: up to the token's last '@'
_BARE_PASSWORD = re.compile(r"(?<![\w/:.@-])([\w.%+-]+:)[^\s:/@'\"]\S*@(?=[\w\[])")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_known: set[str] = set()


def _passwords(conninfo: str) -> set[str]:
    found = {m.group(2).strip("'") for m in _KV_PASSWORD.finditer(conninfo)}
    rest = conninfo.split("://", 1)[-1]
    if "@" in rest:
        userinfo = rest.rsplit("@", 1)[0]
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            found.update({password, unquote(password)})
            found.update(piece for piece in password.split("@") if len(piece) >= 4)
    return {secret for secret in found if len(secret) >= 3}


def remember(conninfo: str | None) -> str | None:
    """Remember the password(s) in ``conninfo`` so ``redact`` masks them; returns it as is."""
    if conninfo:
        _known.update(_passwords(conninfo))
    return conninfo


def redact(text: str) -> str:
    """``text`` with every remembered password, and anything shaped like one, masked."""
    for secret in sorted(_known, key=len, reverse=True):
        text = text.replace(secret, _MASK)
    text = _URL_PASSWORD.sub(rf"\g<1>{_MASK}@", text)
    text = _BARE_PASSWORD.sub(rf"\g<1>{_MASK}@", text)
    return _KV_PASSWORD.sub(rf"\g<1>{_MASK}", text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's final message (attach it to handlers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
