"""Every option check, with one error shape, for every surface that takes options.

Queue and job declarations, ``RetryPolicy``, ``Worker``, ``Subscriber``, ``PostgresBackend``,
the ``[queues]`` and ``[http]`` TOML tables all check their values here, so they agree: a
``bool`` is never an int, a float is never an int, a string is never a bool. Every failure is a
``ConfigError`` whose message starts with where the value came from::

    <file>: <where>: <key> must be ..., got <value>

``file`` and ``where`` are optional (a TOML file and its table, or a class and its
attribute). This module does no I/O and imports nothing above the vocabulary layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from queuey.errors import ConfigError

__all__ = ["Site", "check_bool", "check_float", "check_int", "check_str", "fail"]


@dataclass(frozen=True)
class Site:
    """Where a checked value comes from: an optional file and an optional place in it (a TOML
    table such as ``queues`` or a declaration such as ``AppQueues.emails``)."""

    where: str = ""
    file: str = ""

    def name(self, key: str) -> str:
        """``key`` qualified by the place: ``"queues.batch"``, ``"AppQueues.emails: prefetch"``."""
        if not self.where:
            return key
        separator = "." if self.file else ": "
        return f"{self.where}{separator}{key}"

    def error(self, key: str, message: str) -> ConfigError:
        """The ``ConfigError`` for ``key``: ``"<file>: <where>.<key> <message>"``."""
        text = f"{self.name(key)} {message}"
        return ConfigError(f"{self.file}: {text}" if self.file else text)


NOWHERE = Site()


def fail(key: str, message: str, site: Site = NOWHERE) -> ConfigError:
    """The ``ConfigError`` naming ``key`` (and ``site``) with ``message``; raise it."""
    return site.error(key, message)


def check_int(
    value: object,
    key: str,
    *,
    low: int | None = None,
    high: int | None = None,
    site: Site = NOWHERE,
) -> int:
    """``value`` as an ``int`` in ``low..high`` (either bound optional).

    Raises:
        ConfigError: ``value`` is a bool, a float, not an int, or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise site.error(key, f"must be a whole number{_range(low, high)}, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise site.error(key, f"must be a whole number{_range(low, high)}, got {value!r}")
    return value


def check_float(
    value: object,
    key: str,
    *,
    low: float | None = None,
    positive: bool = False,
    site: Site = NOWHERE,
) -> float:
    """``value`` (an int or a float, not a bool) as a finite ``float`` >= ``low``; with
    ``positive``, strictly greater than zero.

    Raises:
        ConfigError: not a finite number, or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise site.error(key, f"must be a finite number, got {value!r}")
    number = float(value)
    if positive and number <= 0:
        raise site.error(key, f"must be greater than zero, got {value!r}")
    if low is not None and number < low:
        raise site.error(key, f"must be at least {low:g}, got {value!r}")
    return number


def check_bool(value: object, key: str, *, site: Site = NOWHERE) -> bool:
    """``value`` as a ``bool``; nothing else (not ``"no"``, not ``0``) is accepted.

    Raises:
        ConfigError: ``value`` is not a bool.
    """
    if not isinstance(value, bool):
        raise site.error(key, f"must be true or false, got {value!r}")
    return value


def check_str(value: object, key: str, *, non_empty: bool = False, site: Site = NOWHERE) -> str:
    """``value`` as a ``str``; with ``non_empty``, one that is not blank.

    Raises:
        ConfigError: ``value`` is not a string, or is blank when ``non_empty``.
    """
    if not isinstance(value, str):
        raise site.error(key, f"must be a string, got {value!r}")
    if non_empty and not value.strip():
        raise site.error(key, f"must be a non-empty string, got {value!r}")
    return value


def _range(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f" in {low}..{high}"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""
