"""The publishing half of the backend contract for code without an event loop
(``queuey.sync.Producer``), re-exported by ``backends.base``: ``SyncBackend`` and its optional
capabilities, the same methods and semantics as their async twins, called synchronously."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Protocol, runtime_checkable

from queuey.backends._records import CancelResult, JobEnd, JobInfo
from queuey.envelope import Envelope
from queuey.queues import QueueConfig
from queuey.unique import EnqueueResult, UniqueKey

__all__ = ["SyncBackend", "SyncJobLookup", "SyncResultBackend", "SyncUniqueBackend"]


class SyncBackend(Protocol):
    """The publishing half of ``Backend``, called without an event loop (thread-safe).

    Attributes:
        supports_transactions: ``publish`` accepts the caller's database connection.
    """

    supports_transactions: bool

    def declare(self, queues: Sequence[QueueConfig]) -> None:
        """As ``Backend.declare``."""
        ...

    def publish(
        self,
        envelopes: Sequence[Envelope],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> None:
        """As ``Backend.publish``; ``connection`` is a synchronous one (psycopg
        ``Connection``, or Django's ``django.db.connection``)."""
        ...

    def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """As ``Backend.defer``."""
        ...

    def cancel(self, job_id: str) -> CancelResult:
        """As ``Backend.cancel``."""
        ...

    def close(self) -> None:
        """Release connections (and threads). Idempotent."""
        ...


@runtime_checkable
class SyncUniqueBackend(Protocol):
    """``UniqueBackend.publish_unique`` for code without an event loop (``queuey.sync``
    backends over PostgreSQL or memory)."""

    def publish_unique(
        self,
        envelopes: Sequence[Envelope],
        keys: Sequence[UniqueKey | None],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> list[EnqueueResult]:
        """As ``UniqueBackend.publish_unique``; ``connection`` as for ``SyncBackend.publish``.

        Raises:
            BackendError: nothing was published.
            ConfigError: the backend cannot refuse duplicates (RabbitMQ).
        """
        ...


@runtime_checkable
class SyncJobLookup(Protocol):
    """``JobLookup`` for code without an event loop (``queuey.sync`` backends)."""

    def job(self, job_id: str) -> JobInfo | None:
        """As ``JobLookup.job``."""
        ...


@runtime_checkable
class SyncResultBackend(Protocol):
    """``ResultBackend`` for code without an event loop (``queuey.sync`` backends)."""

    def wait_end(self, job_id: str, timeout: float | None) -> JobEnd | None:
        """As ``ResultBackend.wait_end``, blocking the calling thread."""
        ...
