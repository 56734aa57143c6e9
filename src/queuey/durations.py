"""Durations as users write them: ``"500ms"``, ``"30s"``, ``"2 m"``, ``"1h"``, ``"30"``
(seconds), a ``timedelta``, or a number of seconds.

``parse_duration`` is for declarations (queue and job options, timeouts), where zero is refused;
``parse_delay`` is for runtime delays, where zero means "now". The syntax itself is
``_duration_syntax``'s, shared with ``Defer``.

Nothing longer than ``MAX_DURATION`` (3650 days, about 10 years) is taken, as a declaration or
as a delay; a backend may hold less (``Backend.max_delay``), which the producer checks.
"""

from __future__ import annotations

from datetime import timedelta

from queuey._duration_syntax import MAX_DURATION, Duration, to_delay, to_timedelta
from queuey.errors import ConfigError

__all__ = ["MAX_DURATION", "Duration", "parse_delay", "parse_duration"]


def parse_duration(value: Duration, what: str = "duration") -> timedelta:
    """Parse a declared duration, which must be strictly positive.

    Args:
        value: ``"500ms"``, ``"30s"``, ``"2 m"``, ``"1h"``, ``"1d"``, ``"30"`` (seconds), a
            ``timedelta`` or a number of seconds.
        what: the name of the attribute being parsed, used in the error message.

    Returns:
        The duration as a ``timedelta``.

    Raises:
        ConfigError: the value does not parse, is zero or negative, or is longer than
            ``MAX_DURATION``.
    """
    try:
        result = to_timedelta(value)
    except ValueError as exc:
        raise ConfigError(f"{what}: {exc}") from None
    if result <= timedelta(0):
        raise ConfigError(f"{what}: a duration must be greater than zero, got {value!r}")
    return result


def parse_delay(value: Duration, what: str = "delay") -> timedelta:
    """Parse a runtime delay: like ``parse_duration``, but zero is allowed and means now.

    Raises:
        ConfigError: the value does not parse, is negative, or is longer than
            ``MAX_DURATION``.
    """
    try:
        return to_delay(value)
    except ValueError as exc:
        raise ConfigError(f"{what}: {exc}") from None
