"""Reading a duration as users write it: ``"500ms"``, ``"30s"``, ``"2 m"``, ``"1h"``, ``"1d"``,
``"30"`` (seconds), a ``timedelta``, or a number of seconds.

This is the core that ``durations`` (declared durations and runtime delays) and ``errors``
(``Defer``'s delay) share. It imports nothing from queuey, so both can use it without importing
each other; it raises a plain ``ValueError`` whose text each caller puts behind the name of the
value (``"job_timeout: ..."``, ``"Defer delay: ..."``) in a ``ConfigError``.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

__all__ = ["MAX_DURATION", "Duration", "to_delay", "to_timedelta"]

Duration = str | float | int | timedelta
"""What a duration may be given as: a string with a unit, a ``timedelta``, or seconds."""

MAX_DURATION = timedelta(days=3650)
"""The longest duration or delay queuey takes anywhere: 3650 days (about 10 years).

Every declared duration (``message_ttl``, retry ``delay``/``base``/``max``, ``job_timeout``,
``lease``, ``poll_interval``...) and every runtime delay (``enqueue_after``, ``defer``,
``Defer``, ``enqueue_many(delay=)``) is at most this, so no clock arithmetic of a backend
overflows (PostgreSQL's ``now() + interval``, a ``datetime`` read back by psycopg, the event
loop's timers). A backend may hold less: ``Backend.max_delay`` (RabbitMQ: about 24.8 days).
"""
_TOO_LONG = "longer than the longest duration queuey takes (3650 days, about 10 years)"

_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def to_timedelta(value: object) -> timedelta:
    """``value`` as a ``timedelta`` of any sign.

    Raises:
        ValueError: ``value`` is not a duration (a bool, a non-finite number, a string that
            does not parse, anything else), or is longer than ``MAX_DURATION`` either way.
    """
    try:
        result = _convert(value)
    except OverflowError:
        raise ValueError(f"{value!r} is {_TOO_LONG}") from None
    if not -MAX_DURATION <= result <= MAX_DURATION:
        raise ValueError(f"{value!r} is {_TOO_LONG}")
    return result


def to_delay(value: object) -> timedelta:
    """``value`` as a runtime delay: like ``to_timedelta``, but never negative (zero is now).

    Raises:
        ValueError: not a duration, or negative.
    """
    result = to_timedelta(value)
    if result < timedelta(0):
        raise ValueError(f"a delay cannot be negative, got {value!r}")
    return result


def _convert(value: object) -> timedelta:
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}")
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number of seconds")
        return timedelta(seconds=value)
    if isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            raise ValueError(
                f"{value!r} is not a duration (use e.g. '500ms', '30s', '2m', '1h' or '30')"
            )
        return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    raise ValueError(f"expected a duration, got {type(value).__name__}")
