"""The ``queuey jobs`` group: commands about one job by id, against a live database. Its
commands live in their own modules, which register on ``jobs`` (``_jobs_cmd``: cancel;
``_jobs_show``: show)."""

from __future__ import annotations

from queuey.cli._root import main

__all__ = ["jobs"]


@main.group("jobs")
def jobs() -> None:
    """One job (or topic message) by its id (PostgreSQL): show or cancel it."""
