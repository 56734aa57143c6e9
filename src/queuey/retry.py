"""Retry policies: pure values mapping a failed attempt to "retry after this delay" or "give up".

The math is seed ``001``'s (SEEDS-DIGEST §2.4): exponential waits
``min(max, base * factor ** (attempt - 1))`` with full jitter drawn uniformly from
``[0, computed]``; fixed waits ``delay``; none waits nothing. ``max_attempts`` counts the first
try, so ``max_attempts=1`` never retries.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum

from queuey.durations import Duration, parse_delay, parse_duration
from queuey.errors import ConfigError

__all__ = ["Backoff", "RetryPolicy"]


class Backoff(Enum):
    """How the wait between attempts is computed."""

    NONE = "none"
    FIXED = "fixed"
    EXPONENTIAL = "exponential"


def _check_attempts(max_attempts: int) -> int:
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ConfigError(f"max_attempts: must be an integer >= 1, got {max_attempts!r}")
    return max_attempts


@dataclass(frozen=True)
class RetryPolicy:
    """A frozen retry policy. Build one with ``none()``, ``fixed()`` or ``exponential()``.

    Attributes:
        max_attempts: total tries including the first (>= 1).
        backoff: the kind of wait.
        delay: the wait of a fixed policy.
        base: the first wait of an exponential policy.
        factor: the growth factor of an exponential policy (> 0, finite).
        max: the cap of an exponential policy.
        jitter: full jitter (uniform in ``[0, computed]``) on an exponential policy.
    """

    max_attempts: int = 1
    backoff: Backoff = Backoff.NONE
    delay: timedelta = timedelta(0)
    base: timedelta = timedelta(seconds=1)
    factor: float = 2.0
    max: timedelta = timedelta(minutes=5)
    jitter: bool = True

    @classmethod
    def none(cls, max_attempts: int = 1) -> RetryPolicy:
        """Retry at once, up to ``max_attempts`` tries in all (1 by default: no retry)."""
        return cls(max_attempts=_check_attempts(max_attempts))

    @classmethod
    def fixed(cls, max_attempts: int, delay: Duration) -> RetryPolicy:
        """Wait ``delay`` (a duration string, ``timedelta`` or seconds) between tries.

        Raises:
            ConfigError: ``max_attempts`` < 1 or ``delay`` invalid or zero.
        """
        wait = parse_duration(delay, "retry delay")
        return cls(max_attempts=_check_attempts(max_attempts), backoff=Backoff.FIXED, delay=wait)

    @classmethod
    def exponential(
        cls,
        max_attempts: int = 3,
        base: Duration = "1s",
        factor: float = 2.0,
        max: Duration = "5m",
        jitter: bool = True,
    ) -> RetryPolicy:
        """Exponential backoff ``min(max, base * factor ** (attempt - 1))``, full jitter.

        Defaults are the seed's: 3 attempts, base 1 s, factor 2, max 5 min, jitter on.

        Raises:
            ConfigError: ``max_attempts`` < 1, a zero or invalid duration, a factor that is not
                positive and finite, or ``base`` greater than ``max``.
        """
        first = parse_duration(base, "retry base")
        cap = parse_duration(max, "retry max")
        if isinstance(factor, bool) or not math.isfinite(factor) or factor <= 0:
            raise ConfigError(f"retry factor: must be a finite number > 0, got {factor!r}")
        if first > cap:
            raise ConfigError(f"retry base: base ({first}) is greater than max ({cap})")
        return cls(
            max_attempts=_check_attempts(max_attempts),
            backoff=Backoff.EXPONENTIAL,
            base=first,
            factor=float(factor),
            max=cap,
            jitter=jitter,
        )

    def computed_delay(self, attempt: int) -> timedelta:
        """The wait after failed ``attempt`` (1-based) before jitter; attempt 0 counts as 1."""
        if self.backoff is Backoff.NONE:
            return timedelta(0)
        if self.backoff is Backoff.FIXED:
            return self.delay
        exponent = max(attempt, 1) - 1
        try:
            seconds = self.base.total_seconds() * self.factor**exponent
        except OverflowError:
            return self.max
        if not math.isfinite(seconds) or seconds >= self.max.total_seconds():
            return self.max
        return timedelta(seconds=seconds)

    def delay_for(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        """The wait after failed ``attempt``, with full jitter applied when enabled."""
        computed = self.computed_delay(attempt)
        if self.backoff is not Backoff.EXPONENTIAL or not self.jitter:
            return computed
        draw = (rng or random).uniform(0.0, computed.total_seconds())
        return parse_delay(draw)

    def decide(self, failed_attempt: int, rng: random.Random | None = None) -> timedelta | None:
        """Return the wait before the next try, or ``None`` when attempts are exhausted."""
        if failed_attempt >= self.max_attempts:
            return None
        return self.delay_for(failed_attempt, rng)
