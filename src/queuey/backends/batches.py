"""What a backend stores for a batch of jobs (``queuey.batches``): its members, its callbacks,
and the counts that say how far it is.

A batch's members are ordinary jobs that carry its id (the header ``queuey-batch``). Each end of
a member (success, or failed, cancelled, lost for good) is counted in the same statement or
step that ends it; the end that leaves no member pending releases the callbacks with the final
counts, exactly once: ``on_complete`` always, ``on_success`` when no member failed (otherwise
it ends cancelled, saying why). Members are added only while some member has not ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from queuey.backends.steps import StepRow
from queuey.errors import NotSupportedError

__all__ = [
    "BATCH_HEADER",
    "BatchBackend",
    "BatchProgress",
    "SyncBatchBackend",
    "batches_refused",
]

BATCH_HEADER = "queuey-batch"
"""The header of a batch member's envelope that names its batch (``JobContext.batch_id``)."""


class BatchProgress(BaseModel):
    """How far a batch is; also what its callbacks' builders receive (then ``pending`` is 0).

    Attributes:
        batch_id: the batch's id (a UUID string).
        total: members so far (those added while it runs included).
        done: members that succeeded.
        failed: members that ended otherwise (failed, cancelled, lost for good).
        pending: members not ended yet (due, scheduled, running or retrying).
    """

    batch_id: str
    total: int
    done: int
    failed: int
    pending: int

    @property
    def ended(self) -> bool:
        """Whether every member has ended (the callbacks were released)."""
        return self.pending == 0


@runtime_checkable
class BatchBackend(Protocol):
    """A backend that runs batches durably (PostgreSQL, memory)."""

    async def start_batch(
        self,
        batch_id: str,
        rows: Sequence[StepRow],
        on_success: str | None,
        on_complete: str | None,
    ) -> None:
        """Store batch ``batch_id`` at once (all or nothing): its members (rows without
        parents, due now) and its callbacks (rows with one parent, waiting; ``on_success`` and
        ``on_complete`` are their job ids).

        Raises:
            BackendError: nothing was stored.
        """
        ...

    async def add_to_batch(
        self, batch_id: str, rows: Sequence[StepRow], *, connection: Any = None
    ) -> bool:
        """Add members ``rows`` (due now) to batch ``batch_id`` while some member has not
        ended; ``connection``: the caller's transaction (PostgreSQL), the members then commit
        with it. ``False`` (nothing stored) when the batch has ended or does not exist.

        Raises:
            BackendError: nothing was stored.
        """
        ...

    async def batch_progress(self, batch_id: str) -> BatchProgress | None:
        """Batch ``batch_id``'s counts; ``None`` when there is no such batch.

        Raises:
            ConfigError: (PostgreSQL) ``batch_id`` is not a UUID.
            BackendError: the backend could not be asked.
        """
        ...


@runtime_checkable
class SyncBatchBackend(Protocol):
    """A synchronous backend that runs batches (``ThreadedBackend`` over a ``BatchBackend``)."""

    def start_batch(
        self,
        batch_id: str,
        rows: Sequence[StepRow],
        on_success: str | None,
        on_complete: str | None,
    ) -> None:
        """As ``BatchBackend.start_batch``, blocking."""
        ...

    def add_to_batch(self, batch_id: str, rows: Sequence[StepRow]) -> bool:
        """As ``BatchBackend.add_to_batch`` (no caller's connection), blocking."""
        ...

    def batch_progress(self, batch_id: str) -> BatchProgress | None:
        """As ``BatchBackend.batch_progress``, blocking."""
        ...


def batches_refused(backend: object) -> NotSupportedError:
    """The error for ``backend``, which cannot run batches."""
    return NotSupportedError(
        f"{type(backend).__name__} cannot run batches: each member's end must be counted with "
        "it, and the batch's callbacks released by the last; use PostgreSQL or memory (a "
        "synchronous caller: ThreadedBackend over either)"
    )
