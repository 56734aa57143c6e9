"""The counts of the batches of a memory backend (``_batches.py`` runs them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from queuey.backends.base import JobState
from queuey.backends.batches import BatchProgress
from queuey.backends.steps import StepRow

__all__ = ["Batches"]


@dataclass
class _Batch:
    total: int
    pending: int
    callbacks: list[tuple[StepRow, bool]] = field(default_factory=list)  # (row, on success)
    done: int = 0
    failed: int = 0

    def progress(self, batch_id: str) -> BatchProgress:
        return BatchProgress(
            batch_id=batch_id,
            total=self.total,
            done=self.done,
            failed=self.failed,
            pending=self.pending,
        )


class Batches:
    """The batches of one memory backend: counts per batch, and which batch each member of
    one not yet ended belongs to."""

    def __init__(self) -> None:
        self._batches: dict[str, _Batch] = {}
        self._members: dict[str, str] = {}
        self.on_end: Callable[[str, JobState], None] | None = None
        """Called by ``job_ended`` for a member of a batch (the backend's)."""

    def job_ended(self, job_id: str, state: JobState) -> None:
        """Job ``job_id`` ended in ``state``: ``on_end`` when it is a batch's member."""
        if self.on_end is not None and job_id in self._members:
            self.on_end(job_id, state)

    def start(
        self, batch_id: str, rows: Sequence[StepRow], callbacks: list[tuple[StepRow, bool]]
    ) -> None:
        """Count ``rows`` (the members) as batch ``batch_id``'s, with its ``callbacks``."""
        self._batches[batch_id] = _Batch(len(rows), len(rows), callbacks)
        self._members.update((row.job_id, batch_id) for row in rows)

    def add(self, batch_id: str, rows: Sequence[StepRow]) -> bool:
        """Count ``rows`` as more members of ``batch_id`` unless it has ended (``False``)."""
        found = self._batches.get(batch_id)
        if found is None or found.pending == 0:
            return False
        found.total += len(rows)
        found.pending += len(rows)
        self._members.update((row.job_id, batch_id) for row in rows)
        return True

    def progress(self, batch_id: str) -> BatchProgress | None:
        """Batch ``batch_id``'s counts, ``None`` when unknown."""
        found = self._batches.get(batch_id)
        return None if found is None else found.progress(batch_id)

    def ended(self, job_id: str, state: JobState) -> list[tuple[StepRow, Any, str | None]]:
        """Member ``job_id`` ended in ``state``: the callbacks its end releases, each with its
        payload and ``None`` (due now) or the error it ends cancelled with."""
        batch_id = self._members.pop(job_id, None)
        found = None if batch_id is None else self._batches.get(batch_id)
        if batch_id is None or found is None:
            return []
        found.pending -= 1
        if state == "done":
            found.done += 1
        else:
            found.failed += 1
        if found.pending:
            return []
        inputs = [found.progress(batch_id).model_dump()]
        released: list[tuple[StepRow, Any, str | None]] = []
        for row, on_success in found.callbacks:
            payload = {"__queuey_step__": {**(row.step or {}), "inputs": inputs}}
            error = None
            if on_success and found.failed:
                error = (
                    f"batch {batch_id}: {found.failed} of {found.total} jobs failed; its "
                    "success callback does not run"
                )
            released.append((row, payload, error))
        return released
