"""Every option check, with one error shape, for every surface that takes options.

Queue and job declarations, ``RetryPolicy``, the ``[queues]`` and ``[http]`` TOML tables check
their values here, so they agree: a ``bool`` is never an int, a float is never an int, a string
is never a bool, and nothing else is a string. Every failure is a ``ConfigError`` shaped::

    [<file>: ]<place><key>: <what was expected>, got <what was given>

``<place><key>`` names the value the way its surface spells it: ``queues.batch`` (a TOML
table's dotted key), ``[http] base`` (a TOML table in brackets), ``AppQueues.emails: durable``
(an attribute of a declaration). ``<file>`` is there when the value came from a file. A value
that is not a number, a bool or a short string is shown by its type only, so a message never
echoes a secret.

This module does no I/O and imports nothing but ``errors``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from queuey.errors import ConfigError

__all__ = [
    "NOWHERE",
    "Site",
    "check_bool",
    "check_float",
    "check_int",
    "check_str",
    "fail",
    "shown",
]

_SHOWN_CHARS = 32


@dataclass(frozen=True)
class Site:
    """Where checked values come from: a place (a declaration, a TOML table) and a file.

    Build one with ``declaration``, ``table`` or ``section``; ``NOWHERE`` is a bare key.

    Attributes:
        where: the place, e.g. ``"AppQueues.emails"``, ``"queues"`` or ``"[http]"``.
        file: the file the values came from, or ``""``.
        join: what goes between the place and a key (``": "``, ``"."`` or ``" "``).
    """

    where: str = ""
    file: str = ""
    join: str = ": "

    @classmethod
    def declaration(cls, where: str) -> Site:
        """An attribute or keyword of a class: ``AppQueues.emails: durable``."""
        return cls(where, "", ": ")

    @classmethod
    def table(cls, name: str, file: str = "") -> Site:
        """A TOML table named by dotted keys: ``queues.batch``."""
        return cls(name, file, ".")

    @classmethod
    def section(cls, header: str, file: str = "") -> Site:
        """A TOML table named by its header: ``[http] base``."""
        return cls(header, file, " ")

    def name(self, key: str) -> str:
        """``key`` qualified by the place."""
        return f"{self.where}{self.join}{key}" if self.where else key

    def error(self, key: str, message: str) -> ConfigError:
        """The ``ConfigError`` saying ``message`` about ``key`` here (to be raised)."""
        return self._with_file(ConfigError(f"{self.name(key)}: {message}"))

    def about(self, message: str) -> ConfigError:
        """The ``ConfigError`` saying ``message`` about the place itself (to be raised)."""
        return self._with_file(ConfigError(f"{self.where}: {message}" if self.where else message))

    def locate(self, error: ConfigError) -> ConfigError:
        """``error`` (whose message starts with a key) re-stated at this site."""
        return self._with_file(ConfigError(self.name(str(error))))

    @contextmanager
    def context(self) -> Iterator[None]:
        """Re-raise any ``ConfigError`` of the block located at this site (``from None``)."""
        try:
            yield
        except ConfigError as exc:
            raise self.locate(exc) from None

    def _with_file(self, error: ConfigError) -> ConfigError:
        return ConfigError(f"{self.file}: {error}") if self.file else error


NOWHERE = Site()
"""No place: errors name the bare key."""


def fail(key: str, message: str, site: Site = NOWHERE) -> ConfigError:
    """The ``ConfigError`` saying ``message`` about ``key`` at ``site`` (to be raised)."""
    return site.error(key, message)


def shown(value: object) -> str:
    """``value`` as an error message shows it: numbers, bools, ``None`` and short strings by
    ``repr``; anything else (a long string, a list, a table) by its type only."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str) and len(value) <= _SHOWN_CHARS:
        return repr(value)
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    return type(value).__name__


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
        ConfigError: ``value`` is a bool, a float or any other non-int, or is out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise site.error(key, f"expected an integer{_range(low, high)}, got {shown(value)}")
    if low is not None and value < low:
        raise site.error(key, f"expected an integer{_range(low, high)}, got {value}")
    if high is not None and value > high:
        raise site.error(key, f"expected an integer{_range(low, high)}, got {value}")
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
    expected = "a finite number" + (" > 0" if positive else "")
    expected += "" if low is None else f" >= {low:g}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise site.error(key, f"expected {expected}, got {shown(value)}")
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        raise site.error(key, f"expected {expected}, got {shown(value)}") from None
    too_low = (positive and number <= 0) or (low is not None and number < low)
    if not math.isfinite(number) or too_low:
        raise site.error(key, f"expected {expected}, got {shown(value)}")
    return number


def check_bool(value: object, key: str, *, site: Site = NOWHERE) -> bool:
    """``value`` as a ``bool``; nothing else (not ``"no"``, not ``0``) is accepted.

    Raises:
        ConfigError: ``value`` is not a bool.
    """
    if not isinstance(value, bool):
        raise site.error(key, f"expected true or false, got {shown(value)}")
    return value


def check_str(value: object, key: str, *, non_empty: bool = False, site: Site = NOWHERE) -> str:
    """``value`` as a ``str``; with ``non_empty``, one that is not blank.

    Raises:
        ConfigError: ``value`` is not a string (the message names its type, never the value),
            or is blank when ``non_empty``.
    """
    if not isinstance(value, str):
        raise site.error(key, f"expected a string, got {type(value).__name__}")
    if non_empty and not value.strip():
        raise site.error(key, f"expected a non-empty string, got {value!r}")
    return value


def _range(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f" in {low}..{high}"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""
