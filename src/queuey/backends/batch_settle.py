"""What a backend's consumer may offer batch handlers: recording many outcomes at once.

A worker runs a batch handler's jobs as one call; a consumer that is a ``BatchSettling``
records their outcomes together (PostgreSQL: one fenced statement for the whole batch). It
records what it can and says which; the worker settles every other one by one, as any
delivery, so nothing of the single-job contract (fencing, a cancel or a lost claim told apart,
a refused value dead-lettered) is lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from queuey._outcome import Outcome
from queuey.backends.base import Delivery

__all__ = ["BatchSettling"]


@runtime_checkable
class BatchSettling(Protocol):
    """A consumer that records the outcomes of many of its deliveries at once."""

    async def settle_many(
        self, deliveries: Sequence[Delivery], outcomes: Sequence[Outcome]
    ) -> list[bool]:
        """Record ``outcomes[i]`` for ``deliveries[i]`` where it can, all in one go.

        Returns:
            Per delivery, whether its outcome was recorded; the caller settles each other one
            by one (a lost claim, a cancel asked for, an outcome this cannot record at once,
            or all of them when the database failed).
        """
        ...
