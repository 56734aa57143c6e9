"""Unique jobs: ``Unique`` (what a job class declares), ``UniqueKey`` (what a backend is handed
with an envelope) and ``EnqueueResult`` (what an enqueue answers).

```python
class SyncAccount(Job[Q, Any], queue=Q.sync, unique=Unique(by=("account_id",), period="1h")):
    account_id: int
```

A job's key is its job type, its queue and the values of the ``by`` fields (canonical JSON).
A second enqueue with the same key is refused while the first is in one of ``states``; with a
``period``, the key also holds the period's bucket on the backend's clock (the database's on
PostgreSQL), so the job runs at most once per period. ``on_conflict="replace"`` debounces: the
pending job takes the new payload and due time; while the holder runs, the update becomes its
one pending successor, run after it (unless ``done`` or ``failed`` keep the key: then skipped).

The states a duplicate is refused in are a bitmask on the row (``mask``): a row holds its key
from its insert while it is in a state of the set, and releases it on moving out of the set. A
job coming back to pending (a retry, a deferral, a lost lease, an operator's retry) takes its
key back; when a newer job holds it by then, that job stands for the key and this one does not
run again (it ends cancelled as superseded; an operator's retry leaves it). So the set must
include ``pending``, and ``done`` or ``failed`` only with ``running``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, get_args

from queuey._validation import Site, shown
from queuey.durations import Duration, parse_duration

__all__ = [
    "ALL_STATES",
    "DEFAULT_STATES",
    "EnqueueOutcome",
    "EnqueueResult",
    "FirstPublication",
    "IdempotencyKey",
    "OnConflict",
    "State",
    "Unique",
    "UniqueKey",
    "state_mask",
]

State = Literal["pending", "running", "done", "failed"]
"""A job's state as a unique key sees it (``pending`` includes jobs due later)."""

OnConflict = Literal["skip", "replace"]
"""What a refused duplicate does: nothing (keep the first), or replace the pending job's
payload and due time (debounce)."""

STATE_BITS: dict[State, int] = {"pending": 1, "running": 2, "done": 4, "failed": 8}
"""Each state's bit in a row's ``unique_states`` mask (the SQL statements use these values)."""

DEFAULT_STATES: frozenset[State] = frozenset({"pending", "running"})
ALL_STATES: frozenset[State] = frozenset(STATE_BITS)


def state_mask(states: Iterable[State]) -> int:
    """The bitmask of ``states`` (pending 1, running 2, done 4, failed 8)."""
    mask = 0
    for state in states:
        mask |= STATE_BITS[state]
    return mask


@dataclass(frozen=True)
class UniqueKey:
    """A unique key as a backend receives it with an envelope.

    Attributes:
        key: the key without the period bucket (job type, queue, field values).
        mask: the refused states as a bitmask (``state_mask``).
        period: seconds of the period whose bucket (epoch-aligned, backend clock) joins the
            key; ``None`` for none.
        replace: a conflict with a pending job replaces its payload, headers and due time.
    """

    key: str
    mask: int = 3
    period: float | None = None
    replace: bool = False

    def holds(self, state: State) -> bool:
        """Whether a job in ``state`` keeps this key."""
        return bool(self.mask & STATE_BITS[state])

    def bucketed(self, now_epoch: float) -> str:
        """The full key at ``now_epoch`` (seconds): the key plus the period's bucket number."""
        if self.period is None:
            return self.key
        return f"{self.key}@{int(now_epoch // self.period)}"


@dataclass(frozen=True)
class IdempotencyKey:
    """A publication's idempotency key, as a backend's ``publish_once`` receives it.

    Attributes:
        key: the key (scoped by the caller, e.g. with the app's prefix).
        fingerprint: what the publication carries (a hash of topic and body): the same key
            with another fingerprint is a conflict the caller reports.
        window: seconds the key is remembered (backend clock); an older use is forgotten.
    """

    key: str
    fingerprint: str
    window: float


@dataclass(frozen=True)
class FirstPublication:
    """What ``publish_once`` found or wrote under an idempotency key.

    Attributes:
        ids: the ids of the envelopes of the first publication, in order.
        fingerprint: the first publication's fingerprint.
        fresh: ``True`` when this call wrote them; ``False`` when the key was already used.
    """

    ids: tuple[str, ...]
    fingerprint: str
    fresh: bool


EnqueueOutcome = Literal["inserted", "replaced", "skipped"]
"""What an enqueue did: wrote a new job, gave a pending duplicate the new payload and due time
(``on_conflict="replace"``), or wrote nothing (the key is held)."""


class EnqueueResult(str):
    """A job id (a ``str``, so code that used the id as a string keeps working) that also
    says what the enqueue did.

    Attributes:
        outcome: ``"inserted"`` (a new job was written: the string is its id), ``"replaced"``
            (``on_conflict="replace"``: the pending job holding the key, whose id the string
            is, took the new payload and due time) or ``"skipped"`` (nothing was written: the
            key is held by the job whose id the string is, e.g. with ``"skip"``, or one that
            is done or failed and keeps its key).
        inserted: ``outcome == "inserted"``.
    """

    inserted: bool = True  # on the instance only when not inserted: bulk enqueues make many
    outcome: EnqueueOutcome = "inserted"

    def __new__(
        cls, job_id: str, inserted: bool = True, outcome: EnqueueOutcome | None = None
    ) -> EnqueueResult:
        result = str.__new__(cls, job_id)
        chosen = outcome or ("inserted" if inserted else "skipped")
        if chosen != "inserted":
            result.inserted = False
            result.outcome = chosen
        return result

    @property
    def job_id(self) -> str:
        """The job id as a plain ``str``."""
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"EnqueueResult({self.job_id!r}, outcome={self.outcome!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (EnqueueResult, (self.job_id, self.inserted, self.outcome))


@dataclass(frozen=True)
class Unique:
    """A job class's unique key (the ``unique=`` class keyword of ``Job``).

    Args:
        by: names of the job's fields whose values make the key (with the job type and the
            queue); empty: one key for the whole job type.
        states: the states in which a duplicate is refused: ``"pending"`` (includes jobs
            due later), ``"running"``, ``"done"``, ``"failed"``; default pending and running.
            Must include pending; done or failed only together with running.
        period: a duration (``"1h"``, ``timedelta``, seconds); the key then includes the
            period's bucket (aligned to the epoch, database clock): at most one job per period.
        on_conflict: ``"skip"`` (default: keep the first) or ``"replace"`` (the pending job
            takes the new payload and due time; while the holder runs, the update becomes its
            one pending successor, run after it ends; with ``done`` or ``failed`` among the
            states a running holder keeps the key and the update is skipped).

    Raises:
        ConfigError: a bad option (the message names the job class once bound to one).
    """

    by: tuple[str, ...] = ()
    states: frozenset[State] = DEFAULT_STATES
    period: timedelta | None = None
    on_conflict: OnConflict = "skip"

    def __init__(
        self,
        by: Iterable[str] | str = (),
        *,
        states: Iterable[State] = DEFAULT_STATES,
        period: Duration | None = None,
        on_conflict: OnConflict = "skip",
    ) -> None:
        object.__setattr__(self, "by", (by,) if isinstance(by, str) else tuple(by))
        chosen = (states,) if isinstance(states, str) else states
        object.__setattr__(self, "states", frozenset(chosen))
        seconds = None if period is None else parse_duration(period, "unique period")
        object.__setattr__(self, "period", seconds)
        object.__setattr__(self, "on_conflict", on_conflict)
        self.check(Site())

    def check(self, site: Site) -> Unique:
        """``self`` if its options are valid.

        Raises:
            ConfigError: naming ``site``'s ``unique`` key.
        """
        for name in self.by:
            if not isinstance(name, str) or not name:
                raise site.error("unique", f"by: expected field names, got {shown(name)}")
        unknown = sorted(str(s) for s in self.states if s not in STATE_BITS)
        if unknown:
            raise site.error(
                "unique", f"states: unknown {unknown}, expected some of {sorted(STATE_BITS)}"
            )
        if "pending" not in self.states:
            raise site.error("unique", "states must include 'pending'")
        if self.states & {"done", "failed"} and "running" not in self.states:
            raise site.error(
                "unique",
                "states with 'done' or 'failed' must include 'running' (a key released "
                "while the job runs cannot be taken back)",
            )
        if self.on_conflict not in get_args(OnConflict):
            raise site.error(
                "unique",
                f"on_conflict: expected 'skip' or 'replace', got {shown(self.on_conflict)}",
            )
        return self

    def key_for(self, job_type: str, queue: str, fields: dict[str, Any]) -> UniqueKey:
        """The ``UniqueKey`` of a job of ``job_type`` on ``queue`` with these field values
        (JSON-ready, as ``model_dump(mode="json")`` gives them)."""
        values = json.dumps([fields.get(name) for name in self.by], sort_keys=True)
        return UniqueKey(
            key=f"job:{queue}:{job_type}:{values}",
            mask=state_mask(self.states),
            period=None if self.period is None else self.period.total_seconds(),
            replace=self.on_conflict == "replace",
        )
