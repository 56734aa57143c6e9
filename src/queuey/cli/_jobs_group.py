"""The ``queuey jobs`` group: commands about one job by id. Its commands live in their own
modules (``_jobs_cmd``: cancel), which register on ``jobs``."""

from __future__ import annotations

from queuey.cli._root import main

__all__ = ["jobs"]


@main.group("jobs")
def jobs() -> None:
    """One job by its id (PostgreSQL): cancel it."""
