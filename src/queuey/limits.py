"""Flow limits: how many rows of a queue (or of one job type), per key, may start.

```python
class AppQueues(QueueSet):
    emails = Queue(limits=[RateLimit(14, per="1s")])          # the whole queue: 14 starts/s

class Sync(Job[AppQueues], queue=AppQueues.sync,
           limits=[Concurrency(3, by="tenant"), RateLimit(100, per="1s", by="tenant"),
                   RateLimit(1000, per="1h", by="tenant")]):
    tenant: str
```

A limit's key is the values of its ``by`` fields, read from the job's payload as
``Unique(by=...)`` reads them; no ``by``: one key for the whole queue (or job type). A row
under a limit whose key is full is not claimed yet: it is not an attempt, not a deferral and
not a retry. PostgreSQL enforces limits in the claim, exactly across every worker process;
the memory backend the same way in one process; RabbitMQ refuses them (``ConfigError``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from queuey._validation import Site, check_int, shown
from queuey.durations import Duration, parse_duration
from queuey.errors import ConfigError

__all__ = [
    "Concurrency",
    "FlowLimit",
    "PAUSED",
    "LimitSpec",
    "RateLimit",
    "ThrottleBackend",
    "ThrottleTally",
    "Throttled",
    "parse_limit",
    "resolve_limits",
    "shown_limits",
]


def _fields(by: Iterable[str] | str) -> tuple[str, ...]:
    return (by,) if isinstance(by, str) else tuple(by)


@dataclass(frozen=True)
class Concurrency:
    """At most ``limit`` rows running at once per key, across every worker process.

    Args:
        limit: rows running at once (1..1,000,000). A row whose worker was lost holds its
            share until its lease expires and the row is reclaimed.
        by: names of the job's fields whose values make the key; empty (default): one key
            for the whole queue or job type.
    """

    limit: int
    by: tuple[str, ...] = ()

    def __init__(self, limit: int, *, by: Iterable[str] | str = ()) -> None:
        object.__setattr__(self, "limit", limit)
        object.__setattr__(self, "by", _fields(by))


@dataclass(frozen=True)
class RateLimit:
    """``limit`` starts per ``per`` for each key, paced evenly (one every ``per / limit``
    seconds), with up to ``burst`` more at once after a quiet spell, across every worker
    process. No span of ``per`` holds more than ``limit + burst`` starts of a key, and a key
    whose worker came late to a start keeps it (up to ``burst`` starts): its long-run rate is
    ``limit`` per ``per`` (a token bucket of ``burst + 1`` starts, filled at that rate).

    Args:
        limit: starts per window (1..1,000,000).
        per: the window (``"1s"``, ``"1h"``, a ``timedelta`` or seconds; at least 1 ms).
        by: names of the job's fields whose values make the key; empty (default): one key
            for the whole queue or job type. Several ``RateLimit`` with the same ``by`` are
            several windows on one key, all enforced.
        burst: starts a key may make ahead of the even pace (0..1,000,000; default 0: never
            ahead, so a late start is not made up).
    """

    limit: int
    per: float
    by: tuple[str, ...] = ()
    burst: int = 0

    def __init__(
        self, limit: int, *, per: Duration, by: Iterable[str] | str = (), burst: int = 0
    ) -> None:
        object.__setattr__(self, "limit", limit)
        seconds = parse_duration(per, "per").total_seconds()
        object.__setattr__(self, "per", seconds)
        object.__setattr__(self, "by", _fields(by))
        object.__setattr__(self, "burst", burst)


FlowLimit = Concurrency | RateLimit
"""A limit as declared (``Queue(limits=...)`` or a job class's ``limits=`` keyword)."""


@dataclass(frozen=True)
class LimitSpec:
    """A limit as a backend enforces it.

    Attributes:
        job_type: the job type it limits; ``None``: every row of the queue.
        by: the key's field names (empty: one key).
        limit: running rows at once (``per`` is ``None``) or starts per ``per`` seconds.
        per: the rate window in seconds; ``None`` for a concurrency cap.
        burst: starts a key of a rate limit may make ahead of its even pace (0 for a cap).
    """

    job_type: str | None
    by: tuple[str, ...]
    limit: int
    per: float | None
    burst: int = 0

    @property
    def ledger(self) -> str:
        """Where the starts of a rate limit are counted: shared by the windows of one key."""
        return f"{self.job_type or ''}|{','.join(self.by)}"

    @property
    def bucket(self) -> str:
        """Where a rate limit's pace is kept per key: its scope, limit and window."""
        return f"{self.ledger}|{self.limit}/{self.per or 0:g}"

    @property
    def spacing(self) -> float:
        """Seconds between two starts of a key at a rate limit's even pace (0 for a cap)."""
        return 0.0 if self.per is None else self.per / self.limit

    @property
    def label(self) -> str:
        """A short name for logs and metrics (``concurrency 3 by tenant``)."""
        what = (
            f"concurrency {self.limit}" if self.per is None else f"rate {self.limit}/{self.per:g}s"
        ) + (f" burst {self.burst}" if self.burst else "")
        scope = f" of {self.job_type}" if self.job_type else ""
        return f"{what}{scope}" + (f" by {','.join(self.by)}" if self.by else "")

    def key_of(self, payload: Any) -> str:
        """The key of a row whose payload (decoded JSON) is ``payload``: its ``by`` values as
        a JSON array (a missing field is ``null``)."""
        values = payload if isinstance(payload, dict) else {}
        return json.dumps([values.get(name) for name in self.by], separators=(",", ":"))


PAUSED = LimitSpec(None, (), 0, None)
"""The limit zero: no row of the queue may start. A paused queue holds it beside its other
limits, so a pause is answered where every limit is (the claim), for every worker at once."""


def resolve_limits(
    site: Site,
    limits: object,
    job_type: str | None = None,
    fields: Sequence[str] | None = None,
) -> tuple[LimitSpec, ...]:
    """``limits`` (a list of ``Concurrency`` / ``RateLimit``) as ``LimitSpec``.

    Args:
        site: where the limits are declared (named in errors).
        limits: the declared value.
        job_type: the job type they limit, or ``None`` for a whole queue.
        fields: the job's field names, to check ``by`` against (``None``: not checked).

    Raises:
        ConfigError: naming ``site``'s ``limits`` key: not a list of limits, a bad ``limit``
            or ``by``, or a ``by`` field the job does not have.
    """
    if isinstance(limits, Concurrency | RateLimit) or not isinstance(limits, list | tuple):
        raise site.error("limits", f"expected a list of Concurrency/RateLimit, got {shown(limits)}")
    specs = []
    for item in limits:
        if not isinstance(item, Concurrency | RateLimit):
            raise site.error(
                "limits", f"expected Concurrency(...) or RateLimit(...), got {shown(item)}"
            )
        check_int(item.limit, "limits: limit", low=1, high=1_000_000, site=site)
        for name in item.by:
            if not isinstance(name, str) or not name:
                raise site.error("limits", f"by: expected field names, got {shown(name)}")
            if fields is not None and name not in fields:
                raise site.error("limits", f"by: {name!r} is not a field of {site.where}")
        per = item.per if isinstance(item, RateLimit) else None
        if per is not None and per < 0.001:
            raise site.error("limits", f"per: a window of at least 1ms, got {per:g}s")
        burst = item.burst if isinstance(item, RateLimit) else 0
        check_int(burst, "limits: burst", low=0, high=1_000_000, site=site)
        specs.append(LimitSpec(job_type, item.by, item.limit, per, burst))
    return tuple(specs)


_SPELLING = re.compile(
    r"(?P<what>concurrency|rate)\s+(?P<limit>\d+)(?:/(?P<per>\S+))?(?:\s+burst\s+(?P<burst>\d+))?"
    r"(?:\s+of\s+(?P<job_type>[^\s,]+))?(?:\s+by\s+(?P<by>\S+))?"
)


def parse_limit(text: str) -> LimitSpec:
    """A limit from its spelling, as ``LimitSpec.label`` writes it: ``concurrency N``,
    ``rate N/PER`` (``PER`` a duration: ``1s``, ``500ms``, ``1h``; optionally ``burst B``), then
    optionally ``of JobType`` and ``by field1,field2``; e.g. ``rate 100/1s of Sync by tenant``.
    The spelling ``queuey queues limit`` and the dashboard read.

    Raises:
        ConfigError: naming ``text``: not such a spelling, a limit outside 1..1,000,000, or a
            window below 1 ms.
    """
    found = _SPELLING.fullmatch(" ".join(str(text).split()))
    rate = found is not None and found["what"] == "rate"
    if found is None or rate != (found["per"] is not None) or (found["burst"] and not rate):
        raise ConfigError(
            f"{text!r} is not a limit: write 'concurrency N' or 'rate N/PER' (PER like 1s, "
            "optionally 'burst B'), then optionally 'of JobType' and 'by field1,field2'"
        )
    limit = int(found["limit"])
    if not 1 <= limit <= 1_000_000:
        raise ConfigError(f"{text!r}: the limit must be 1..1,000,000, got {limit}")
    per = None
    if found["per"] is not None:
        per = parse_duration(found["per"], f"{text!r}: per").total_seconds()
        if per < 0.001:
            raise ConfigError(f"{text!r}: a window of at least 1ms, got {found['per']}")
    by = tuple(name for name in (found["by"] or "").split(",") if name)
    burst = int(found["burst"] or 0)
    if burst > 1_000_000:
        raise ConfigError(f"{text!r}: the burst must be 0..1,000,000, got {burst}")
    return LimitSpec(found["job_type"], by, limit, per, burst)


def shown_limits(limits: Sequence[LimitSpec] | None) -> str:
    """``limits`` spelt as ``parse_limit`` reads them, ``; ``-separated (``none``: empty;
    ``declared``: ``None``, the declared limits)."""
    if limits is None:
        return "declared"
    return "; ".join(spec.label for spec in limits) or "none"


@dataclass(frozen=True, slots=True)
class Throttled:
    """How one kind of a queue's limits held due rows back, in this process.

    Attributes:
        queue: the queue's name.
        limit: ``"concurrency"`` or ``"rate"``.
        claims: claims since the backend opened that held at least one due row back.
        held: the due rows the latest claim held back (at most the rows one claim considers:
            200 on PostgreSQL).
    """

    queue: str
    limit: str
    claims: int
    held: int


class ThrottleTally:
    """What a backend's claims held back, per queue and limit kind (``Throttled``): a few
    dictionary updates per claim of a limited queue, read by the metrics."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], list[int]] = {}

    def record(self, queue: str, limit: str, held: int) -> None:
        """A claim of ``queue`` held ``held`` due rows back under its ``limit`` kind."""
        row = self._seen.setdefault((queue, limit), [0, 0])
        if held > 0:
            row[0] += 1
        row[1] = held

    def snapshot(self) -> list[Throttled]:
        """Every queue and limit kind recorded so far, ordered by queue then kind."""
        return [
            Throttled(queue, limit, claims, held)
            for (queue, limit), (claims, held) in sorted(self._seen.items())
        ]


@runtime_checkable
class ThrottleBackend(Protocol):
    """A backend whose claims report what flow limits held back (PostgreSQL, memory)."""

    def throttled(self) -> list[Throttled]:
        """What this process's claims held back so far, per queue and limit kind; read from
        memory (no round trip)."""
        ...
