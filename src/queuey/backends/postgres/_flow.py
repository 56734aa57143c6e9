"""The parameters of ``claim_limited``: a queue's flow limits (``queuey.limits``) as the
statement reads them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from queuey.limits import LimitSpec, ThrottleTally
from queuey.queues import QueueConfig

__all__ = ["CONCURRENCY_RECHECK", "SCAN", "count_held", "limited_claim"]

SCAN = 200
"""How many of a limited queue's oldest due rows a claim considers (in claim order)."""
CONCURRENCY_RECHECK = 0.2
"""Seconds after which a claim held back by a full concurrency cap looks again: a completion
in another process sends no notification (one in this process wakes the claim at once)."""


def limited_claim(limits: Sequence[LimitSpec]) -> dict[str, Any]:
    """The parameters ``claim_limited`` adds to the claim's: ``limits`` (JSON), ``scan`` and
    ``recheck``."""
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
    return {"limits": json.dumps(rows), "scan": SCAN, "recheck": CONCURRENCY_RECHECK}


def count_held(tally: ThrottleTally, config: QueueConfig, held: tuple[int, int]) -> None:
    """Tell ``tally`` what one claim of ``config``'s queue held back: ``held`` is the due rows
    its concurrency caps and its rate limits held back (a kind the queue has no limit of is
    not recorded)."""
    kinds = {spec.per is None for spec in config.limits}
    if True in kinds:
        tally.record(config.name, "concurrency", int(held[0]))
    if False in kinds:
        tally.record(config.name, "rate", int(held[1]))
