"""Durations as users write them: ``"500ms"``, ``"30s"``, ``"2 m"``, ``"1h"``, ``"30"``
(seconds), a ``timedelta``, or a number of seconds.

``parse_duration`` is for declarations (queue and job options, timeouts), where zero is refused;
``parse_delay`` is for runtime delays, where zero means "now" (DESIGN §2).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

from queuey.errors import ConfigError

__all__ = ["Duration", "parse_delay", "parse_duration"]

Duration = str | float | int | timedelta
"""What a duration may be given as: a string with a unit, a ``timedelta``, or seconds."""

_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def _to_timedelta(value: Duration, what: str) -> timedelta:
    try:
        return _convert(value, what)
    except OverflowError:
        raise ConfigError(f"{what}: {value!r} is too long a duration") from None


def _convert(value: Duration, what: str) -> timedelta:
    if isinstance(value, bool):
        raise ConfigError(f"{what}: expected a duration, got {value!r}")
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ConfigError(f"{what}: {value!r} is not a finite number of seconds")
        return timedelta(seconds=value)
    if isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            raise ConfigError(
                f"{what}: {value!r} is not a duration (use e.g. '500ms', '30s', '2m', '1h' or '30')"
            )
        return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    raise ConfigError(f"{what}: expected a duration, got {type(value).__name__}")


def parse_duration(value: Duration, what: str = "duration") -> timedelta:
    """Parse a declared duration, which must be strictly positive.

    Args:
        value: ``"500ms"``, ``"30s"``, ``"2 m"``, ``"1h"``, ``"1d"``, ``"30"`` (seconds), a
            ``timedelta`` or a number of seconds.
        what: the name of the attribute being parsed, used in the error message.

    Returns:
        The duration as a ``timedelta``.

    Raises:
        ConfigError: the value does not parse, or is zero or negative.
    """
    result = _to_timedelta(value, what)
    if result <= timedelta(0):
        raise ConfigError(f"{what}: a duration must be greater than zero, got {value!r}")
    return result


def parse_delay(value: Duration, what: str = "delay") -> timedelta:
    """Parse a runtime delay: like ``parse_duration``, but zero is allowed and means now.

    Raises:
        ConfigError: the value does not parse or is negative.
    """
    result = _to_timedelta(value, what)
    if result < timedelta(0):
        raise ConfigError(f"{what}: a delay cannot be negative, got {value!r}")
    return result
