"""Reading ``EXPLAIN (FORMAT JSON)`` output in the tests of query plans."""

from __future__ import annotations

from typing import Any

__all__ = ["nodes"]


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """``plan`` and every node below it, depth first."""
    found = [plan]
    for child in plan.get("Plans", []):
        found.extend(nodes(child))
    return found
