"""``Progress``: how far a running job says it is (``ctx.progress``), and how a report is read.

A handler reports a fraction (``ctx.progress(0.4)``) or a count (``ctx.progress(4, total=10)``),
with an optional note. Reporting costs no round trip: the backend keeps the last report of each
running job and writes it with its next heartbeat (PostgreSQL: at most a second later), so
reporting in a tight loop is fine and the last value wins.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["MAX_NOTE", "Progress", "progress_of", "stored_progress"]

MAX_NOTE = 200
"""The longest note kept (characters); a longer one is cut."""


@dataclass(frozen=True)
class Progress:
    """How far a running job says it is (``ctx.progress``); the last value reported wins.

    Attributes:
        fraction: done so far, ``0.0..1.0`` (``done / total`` when a count was given).
        done: items done, when reported as a count.
        total: items in all, when reported as a count.
        note: a short text (at most ``MAX_NOTE`` characters), or ``None``.
    """

    fraction: float
    done: int | None = None
    total: int | None = None
    note: str | None = None

    def to_json(self) -> str:
        """As compact JSON text (what a backend stores)."""
        return json.dumps(asdict(self), separators=(",", ":"), ensure_ascii=False)

    def __str__(self) -> str:
        counted = f" ({self.done}/{self.total})" if self.total is not None else ""
        noted = f": {self.note}" if self.note else ""
        return f"{self.fraction:.0%}{counted}{noted}"


def progress_of(value: float, total: int | None = None, note: str | None = None) -> Progress:
    """A ``Progress`` from a fraction (``value`` in ``0..1``) or a count (``value`` items done
    of ``total``).

    Raises:
        ValueError: a fraction outside ``0..1`` or not finite, a count that is not a whole
            number in ``0..total``, a ``total`` below 1, or a note that is not a string.
    """
    if note is not None and not isinstance(note, str):
        raise ValueError(f"progress note must be a str, got {type(note).__name__}")
    kept = None if note is None else note.replace("\x00", "")[:MAX_NOTE]
    if total is None:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ValueError(
                f"progress must be a fraction 0..1 or a count with total=, got {value!r}"
            )
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"progress fraction must be within 0..1, got {value!r}")
        return Progress(float(value), note=kept)
    if isinstance(total, bool) or not isinstance(total, int) or total < 1:
        raise ValueError(f"progress total must be a whole number >= 1, got {total!r}")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= total:
        raise ValueError(f"progress count must be a whole number in 0..{total}, got {value!r}")
    return Progress(value / total, value, total, kept)


def stored_progress(value: Any) -> Progress | None:
    """A ``Progress`` from what a backend stored (its JSON object), ``None`` for none."""
    if value is None:
        return None
    if isinstance(value, str):
        value = json.loads(value)
    return Progress(**value)
