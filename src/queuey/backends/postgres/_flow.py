"""The parameters of ``claim_limited``: a queue's flow limits (``queuey.limits``) as the
statement reads them, and which claim a queue's claims run (``FlowClaims``)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from queuey.backends.postgres._rows import FlowHeld
from queuey.limits import LimitSpec, ThrottleTally, shown_limits
from queuey.queues import QueueConfig

log = logging.getLogger("queuey.postgres")

__all__ = [
    "CONCURRENCY_RECHECK",
    "SCAN",
    "TAIL",
    "FlowClaims",
    "count_held",
    "limited_claim",
    "limits_json",
    "record_declared",
]

SCAN = 200
"""How many of a limited queue's oldest due rows a claim considers (in claim order)."""
TAIL = 50
"""How many of the newest due rows of each priority a limited claim considers too (rows enqueued
behind a backlog of keys whose limits are full)."""
RECORD_SECS = 5.0
"""How long a worker's start waits, at most, to record its declared limits for the dashboard."""
CONCURRENCY_RECHECK = 0.2
"""Seconds after which a claim held back by a full concurrency cap looks again: a completion
in another process sends no notification (one in this process wakes the claim at once)."""


def limits_json(limits: Sequence[LimitSpec]) -> str:
    """``limits`` as ``claim_limited`` reads them (and ``{flow_set}`` keeps them): a JSON array
    of objects ``n``, ``job_type``, ``fields``, ``cap``, ``per``, ``bucket``, ``spacing``,
    ``tau``."""
    rows = [
        {
            "n": n,
            "job_type": spec.job_type,
            "fields": list(spec.by),
            "cap": spec.limit,
            "per": spec.per,
            "bucket": spec.bucket,
            "spacing": spec.spacing,
            "tau": spec.burst * spec.spacing,
        }
        for n, spec in enumerate(limits)
    ]
    return json.dumps(rows)


def limited_claim(limits: Sequence[LimitSpec], *, room_only: bool = False) -> dict[str, Any]:
    """The parameters ``claim_limited`` adds to the claim's: ``limits`` (JSON: the declared
    limits, replaced in the statement by those set at run time), ``scan``, ``recheck`` and
    ``room_only`` (true for a claim: a cap the queue's running rows cannot reach is not counted
    per key; false where each key's running count is shown)."""
    return {
        "limits": limits_json(limits),
        "scan": SCAN,
        "tail": TAIL,
        "recheck": CONCURRENCY_RECHECK,
        "room_only": room_only,
    }


class FlowClaims:
    """Which claim a queue's claims run: ``claim_limited`` for a queue with declared limits or
    with limits set at run time (as this process's last claim of it saw), else the plain
    ``claim``; and what the limited claims held back (``tally``)."""

    def __init__(self, tally: ThrottleTally) -> None:
        self.tally = tally
        self._set: set[tuple[str, str]] = set()  # (kind, queue) whose limits were set

    def limited(self, config: QueueConfig) -> bool:
        """Whether the next claim of ``config``'s queue runs ``claim_limited``."""
        return bool(config.limits) or (config.kind, config.name) in self._set

    def statement(self, config: QueueConfig) -> tuple[str, dict[str, Any]]:
        """The statement the next claim of ``config``'s queue runs, and the parameters it
        adds: ``claim_limited`` (flow limits, declared or set), ``claim_aged`` (priority
        aging, no limits) or the plain ``claim``."""
        if self.limited(config):
            return "claim_limited", limited_claim(config.limits, room_only=True)
        if config.priority_aging is not None:
            return "claim_aged", {"aging": config.priority_aging, "top": config.max_priority}
        return "claim", {}

    def saw(self, config: QueueConfig, held: FlowHeld, limited: bool) -> bool:
        """Learn from a claim of ``config``'s queue (``limited``: ``claim_limited`` ran) what
        it reported (``held``); true when the plain claim met limits set at run time (it took
        nothing: claim again, limited)."""
        key = (config.kind, config.name)
        if held[2]:
            self._set.add(key)
        else:
            self._set.discard(key)
        if limited and held[0] is not None and held[1] is not None:
            count_held(self.tally, config, (held[0], held[1]), every_kind=held[2])
        return held[2] and not limited


def count_held(
    tally: ThrottleTally, config: QueueConfig, held: tuple[int, int], every_kind: bool = False
) -> None:
    """Tell ``tally`` what one claim of ``config``'s queue held back: ``held`` is the due rows
    its concurrency caps and its rate limits held back (a kind the queue declares no limit of
    is not recorded, unless ``every_kind``: limits set at run time, whose kinds the claim
    alone knows)."""
    kinds = {True, False} if every_kind else {spec.per is None for spec in config.limits}
    if True in kinds:
        tally.record(config.name, "concurrency", int(held[0]))
    if False in kinds:
        tally.record(config.name, "rate", int(held[1]))


class _Counts(Protocol):
    async def _count(self, name: str, params: Any, timeout: float | None = None) -> int: ...


async def record_declared(store: _Counts, queues: Sequence[QueueConfig]) -> None:
    """Record the flow limits ``queues`` declare (``declare_limits``) for the dashboard's Flow
    limits page: one statement, and only when some queue has limits. Best effort: a failure
    is logged (DEBUG) and the worker goes on (its claims carry its own limits)."""
    rows = [
        {"kind": c.kind, "queue": c.name, "limits": json.loads(limits_json(c.limits))}
        | {"shown": shown_limits(c.limits)}
        for c in queues
        if c.limits
    ]
    if not rows:
        return
    try:  # at most RECORD_SECS: a database that does not answer never holds a worker's start
        await asyncio.wait_for(
            store._count("declare_limits", {"rows": json.dumps(rows)}, RECORD_SECS), RECORD_SECS
        )
    except Exception as exc:  # the dashboard's view only: never the worker's concern
        log.debug("could not record the declared flow limits: %s", exc)
