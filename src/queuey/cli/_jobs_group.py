"""The ``queuey jobs`` command group: one job at a time, by the id ``enqueue`` returned, against
a live database. Its commands live beside it (``_jobs_show``: ``queuey jobs show``)."""

from __future__ import annotations

from queuey.cli._root import main

__all__ = ["jobs"]


@main.group("jobs")
def jobs() -> None:
    """One job (or topic message) by its id, whatever its state."""
