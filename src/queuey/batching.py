"""Batch handlers: one call handles a list of jobs of one type (``Worker.batch_handler``).

A batch handler is an ``async def`` taking ``(jobs: list[YourJob], ctx: BatchContext)`` and
returning one outcome per job, in the order of ``jobs``, or ``None`` when every job succeeded.
An item's outcome is what its job's own handler would have ended with: ``None`` (success), or
an exception instance, decided exactly as if that job's handler had raised it: ``Defer(...)``
defers it, ``Fatal(...)`` dead-letters it, ``Retry(...)`` or any other exception retries it
under its job's ``RetryPolicy`` (dead-lettered once the policy is spent). An exception raised by
the handler itself (or its running past the worker's ``job_timeout``) is the outcome of every
job of the batch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, TypeVar

from queuey.jobs import JobContext
from queuey.queues import QueueSet

__all__ = ["BatchContext", "BatchHandler", "BatchResult", "JobClass"]

J = TypeVar("J")
Q_co = TypeVar("Q_co", bound=QueueSet, covariant=True)
J_co = TypeVar("J_co", covariant=True)

BatchResult: TypeAlias = Sequence[BaseException | None] | None
"""What a batch handler returns: per job (same order and length as its ``jobs``) ``None`` for
success or the exception that job ended with; ``None`` alone when every job succeeded."""

BatchHandler: TypeAlias = Callable[[list[J], "BatchContext"], Awaitable[BatchResult]]
"""An ``async def handle(jobs: list[J], ctx: BatchContext) -> BatchResult``."""


class JobClass(Protocol[Q_co, J_co]):
    """A job class of queue set ``Q_co`` whose instances are ``J_co`` (what
    ``Worker.batch_handler`` takes, so that ``mypy`` checks both the set and the handler's
    list element type)."""

    def __call__(self, *args: Any, **kwargs: Any) -> J_co:
        """Build a job."""
        ...

    def job_queue_set(self) -> type[Q_co]:
        """The queue set the job class belongs to."""
        ...


@dataclass(frozen=True, slots=True)
class BatchContext:
    """What a batch handler knows about its batch.

    Attributes:
        queue: the fully qualified queue name the jobs came from.
        jobs: each job's own ``JobContext`` (id, attempt, ``cancelled``, ``progress``...), in
            the order of the handler's ``jobs``. ``ctx.transaction()`` is not available in a
            batch (each job completes with its own outcome once the batch returns).
    """

    queue: str
    jobs: tuple[JobContext, ...]

    def __len__(self) -> int:
        """The number of jobs in the batch."""
        return len(self.jobs)
