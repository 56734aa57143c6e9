"""Retry policies: pure values mapping a failed attempt to "retry after this delay" or "give up".

Exponential waits
``min(max, base * factor ** (attempt - 1))`` with full jitter drawn uniformly from
``[0, computed]``; fixed waits ``delay``; none waits nothing. ``max_attempts`` counts the first
try, so ``max_attempts=1`` never retries.

A policy is usually written inside a declaration (``Queue(retry=...)``, a job's ``retry=``
class keyword), where the error must name the queue or job it is declared for. So a policy
with a bad value does not raise where it is built: it records the problem, and raises it when
it is bound to a queue or job (the ``ConfigError`` then names the declaration, at class
creation) or when it is first used. ``check()`` raises it on demand.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, fields
from datetime import timedelta
from enum import Enum

from queuey._validation import NOWHERE, Site, check_bool, check_float, check_int
from queuey.durations import MAX_DURATION, Duration, parse_delay, parse_duration
from queuey.errors import ConfigError

__all__ = ["Backoff", "RetryPolicy"]


class Backoff(Enum):
    """How the wait between attempts is computed."""

    NONE = "none"
    FIXED = "fixed"
    EXPONENTIAL = "exponential"


@dataclass(frozen=True)
class RetryPolicy:
    """A frozen retry policy. Build one with ``none()``, ``fixed()`` or ``exponential()``.

    Attributes:
        max_attempts: total tries including the first (>= 1).
        backoff: the kind of wait.
        delay: the wait of a fixed policy.
        base: the first wait of an exponential policy.
        factor: the growth factor of an exponential policy (> 0, finite).
        max: the cap of an exponential policy (>= ``base``).
        jitter: full jitter (uniform in ``[0, computed]``) on an exponential policy.

    A bad value is recorded, not raised (see the module's docstring): ``Queue`` and ``Job``
    raise it at class creation naming the declaration; ``decide``, ``delay_for``,
    ``computed_delay`` and ``check`` raise it as a ``ConfigError`` naming the option
    (``"retry base: ..."``).
    """

    max_attempts: int = 1
    backoff: Backoff = Backoff.NONE
    delay: timedelta = timedelta(0)
    base: timedelta = timedelta(seconds=1)
    factor: float = 2.0
    max: timedelta = timedelta(minutes=5)
    jitter: bool = True
    _problem: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        try:
            _check_fields(self)
        except ConfigError as exc:
            object.__setattr__(self, "_problem", str(exc))
        else:
            object.__setattr__(self, "factor", float(self.factor))

    @classmethod
    def none(cls, max_attempts: int = 1) -> RetryPolicy:
        """Retry at once, up to ``max_attempts`` tries in all (1 by default: no retry)."""
        return cls(max_attempts=max_attempts)

    @classmethod
    def fixed(cls, max_attempts: int, delay: Duration) -> RetryPolicy:
        """Wait ``delay`` (a duration string, ``timedelta`` or seconds) between tries.

        A ``max_attempts`` < 1 or a ``delay`` that is invalid or zero makes an invalid policy
        (raised when bound or used).
        """
        try:
            wait = parse_duration(delay, "retry delay")
        except ConfigError as exc:
            return cls._invalid(exc)
        return cls(max_attempts=max_attempts, backoff=Backoff.FIXED, delay=wait)

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

        Defaults: 3 attempts, base 1 s, factor 2, max 5 min, jitter on.
        A ``max_attempts`` < 1, a zero or invalid duration, a factor that is not positive and
        finite, a ``jitter`` that is not a bool, or ``base`` greater than ``max`` makes an
        invalid policy (raised when bound or used).
        """
        try:
            first = parse_duration(base, "retry base")
            cap = parse_duration(max, "retry max")
        except ConfigError as exc:
            return cls._invalid(exc)
        return cls(
            max_attempts=max_attempts,
            backoff=Backoff.EXPONENTIAL,
            base=first,
            factor=factor,
            max=cap,
            jitter=jitter,
        )

    @classmethod
    def _invalid(cls, problem: ConfigError) -> RetryPolicy:
        policy = cls()
        object.__setattr__(policy, "_problem", str(problem))
        return policy

    @property
    def problem(self) -> str | None:
        """What is wrong with this policy (``"retry base: ..."``), or ``None`` if nothing."""
        return self._problem

    @property
    def longest_wait(self) -> timedelta:
        """The longest wait this policy can ask for between two tries (zero when it never
        retries), which a backend must be able to hold (``Backend.max_delay``).

        Raises:
            ConfigError: the policy is invalid.
        """
        self.check()
        if self.max_attempts < 2 or self.backoff is Backoff.NONE:
            return timedelta(0)
        # the waits grow with the attempt for a factor >= 1 and shrink for a factor < 1
        return max(self.computed_delay(1), self.computed_delay(self.max_attempts - 1))

    def check(self, site: Site = NOWHERE) -> RetryPolicy:
        """Return this policy if it is valid.

        Args:
            site: where it is declared, named in the error (``AppQueues.images``).

        Raises:
            ConfigError: the policy's problem, located at ``site``.
        """
        if self._problem is not None:
            raise site.locate(ConfigError(self._problem))
        return self

    def computed_delay(self, attempt: int) -> timedelta:
        """The wait after failed ``attempt`` (1-based) before jitter; attempt 0 counts as 1.

        Raises:
            ConfigError: the policy is invalid.
        """
        self.check()
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
        """The wait after failed ``attempt``, with full jitter applied when enabled.

        Raises:
            ConfigError: the policy is invalid.
        """
        computed = self.computed_delay(attempt)
        if self.backoff is not Backoff.EXPONENTIAL or not self.jitter:
            return computed
        draw = (rng or random).uniform(0.0, computed.total_seconds())
        return parse_delay(draw)

    def decide(self, failed_attempt: int, rng: random.Random | None = None) -> timedelta | None:
        """Return the wait before the next try, or ``None`` when attempts are exhausted.

        Raises:
            ConfigError: the policy is invalid.
        """
        self.check()
        if failed_attempt >= self.max_attempts:
            return None
        return self.delay_for(failed_attempt, rng)

    def __repr__(self) -> str:
        if self._problem is not None:
            return f"<RetryPolicy, invalid: {self._problem}>"
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"RetryPolicy({shown})"


def _check_fields(policy: RetryPolicy) -> None:
    """Every field's type and range, and ``base <= max``; the first problem raises."""
    check_int(policy.max_attempts, "retry max_attempts", low=1)
    if not isinstance(policy.backoff, Backoff):
        raise ConfigError(f"retry backoff: expected a Backoff, got {policy.backoff!r}")
    for name in ("delay", "base", "max"):
        value = getattr(policy, name)
        if not isinstance(value, timedelta) or value < timedelta(0):
            raise ConfigError(f"retry {name}: expected a timedelta >= 0, got {value!r}")
        if value > MAX_DURATION:
            raise ConfigError(
                f"retry {name}: {value} is longer than the longest duration queuey takes "
                "(3650 days, about 10 years)"
            )
    check_float(policy.factor, "retry factor", positive=True)
    check_bool(policy.jitter, "retry jitter")
    if policy.backoff is Backoff.EXPONENTIAL and policy.base > policy.max:
        raise ConfigError(f"retry base: base ({policy.base}) is greater than max ({policy.max})")
