"""Keeping the drivers' per-attempt log lines out of an outage's one line at each end.

queuey logs an outage once when it starts and once when it ends. Underneath, psycopg's pool
logs a WARNING for every failed reconnection attempt (six during one PostgreSQL restart) and
aiormq an ERROR for every failed connect. ``demote`` installs a filter on a driver's logger
that turns chosen records (picked by how their format string starts, and optionally by their
first argument) into DEBUG records: they are dropped unless that logger has DEBUG enabled
(``-vv``), where they are shown at DEBUG with their detail intact.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

__all__ = ["Demote", "demote", "templates"]

Picks = Callable[[logging.LogRecord], bool]
"""Whether a record is one of those to demote."""


class Demote(logging.Filter):
    """Turns the records ``picks`` chooses into DEBUG records, dropped unless the logger they
    were logged on has DEBUG enabled; leaves every other record alone.

    Args:
        picks: which records to demote.
        key: names the filter, so installing it twice installs it once.
    """

    def __init__(self, picks: Picks, key: str) -> None:
        super().__init__()
        self.picks = picks
        self.key = key

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG or not self.picks(record):
            return True
        record.levelno = logging.DEBUG
        record.levelname = logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def templates(messages: Collection[str], first_arg_prefix: str | None = None) -> Picks:
    """Picks the records whose format string starts with one of ``messages`` (and, when
    ``first_arg_prefix`` is given, whose first argument is a string starting with it)."""
    starts = tuple(messages)

    def picks(record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str) or not record.msg.startswith(starts):
            return False
        if first_arg_prefix is None:
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        return bool(args) and str(args[0]).startswith(first_arg_prefix)

    return picks


def demote(logger_name: str, picks: Picks, key: str) -> Demote:
    """Install (once per ``key``) a ``Demote`` filter on the logger ``logger_name``; returns
    the one installed."""
    logger = logging.getLogger(logger_name)
    for existing in logger.filters:
        if isinstance(existing, Demote) and existing.key == key:
            return existing
    installed = Demote(picks, key)
    logger.addFilter(installed)
    return installed
