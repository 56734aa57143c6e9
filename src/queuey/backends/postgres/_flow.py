"""The parameters of ``claim_limited``: a queue's flow limits (``queuey.limits``) as the
statement reads them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from queuey.limits import LimitSpec

__all__ = ["CONCURRENCY_RECHECK", "SCAN", "limited_claim"]

SCAN = 200
"""How many of a limited queue's oldest due rows a claim considers (in claim order)."""
CONCURRENCY_RECHECK = 0.2
"""Seconds after which a claim held back by a full concurrency cap looks again: a completion
in another process sends no notification (one in this process wakes the claim at once)."""


def limited_claim(limits: Sequence[LimitSpec]) -> dict[str, Any]:
    """The parameters ``claim_limited`` adds to the claim's: ``limits`` (JSON), ``scan``,
    ``horizon`` (the longest rate window, seconds) and ``recheck``."""
    rows = [
        {
            "n": n,
            "job_type": spec.job_type,
            "fields": list(spec.by),
            "cap": spec.limit,
            "per": spec.per,
            "ledger": spec.ledger,
        }
        for n, spec in enumerate(limits)
    ]
    windows = [spec.per for spec in limits if spec.per is not None]
    return {
        "limits": json.dumps(rows),
        "scan": SCAN,
        "horizon": max(windows, default=0.0),
        "recheck": CONCURRENCY_RECHECK,
    }
