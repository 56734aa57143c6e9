"""``Admin``'s flow operations (``queuey queues``): pausing and resuming a queue (its limit
zero) and setting its flow limits at run time, each audited with the actor, through the
dashboard's statements (``FlowActions``), so the command line and the dashboard write the same
rows and the same audit entries. Every process's claim reads them at its next claim."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from queuey.backends.dashboard_store import LimitsSet, Pause
from queuey.backends.postgres._dashboard import PgDashboardStore
from queuey.backends.postgres._sql import Statements
from queuey.limits import LimitSpec

__all__ = ["AdminFlow", "PauseKind"]

PauseKind = Literal["job", "topic", "app"]
"""What a pause names: a job queue, a topic, or a topic app (by its ``[queues] prefix``)."""


class AdminFlow:
    """The flow operations of ``Admin`` (its ``conninfo``, ``statements``, ``channel`` and
    ``actor``)."""

    conninfo: str
    statements: Statements
    channel: str
    actor: str

    def _flow_store(self, topic_channel: str | None) -> PgDashboardStore:
        return PgDashboardStore(
            self.conninfo,
            schema=self.statements.schema,
            table=self.statements.table,
            job_channel=self.channel,
            topic_channel=topic_channel or "queuey_queue",
            pool_size=1,
        )

    async def pause_queue(self, queue: str, kind: PauseKind = "job") -> bool:
        """Pause ``queue`` (a job queue, a topic, or with ``kind="app"`` a topic app named by
        its prefix) for every worker: no row of it is claimed from their next claim on (what
        runs finishes). Audited. Returns whether it was running before.

        Raises:
            BackendError: the database cannot be reached or the statement failed.
            SchemaError: the schema is older than this version needs.
        """
        async with self._flow_store(None) as store:
            return await store.pause(self.actor, kind, queue)

    async def resume_queue(
        self, queue: str, kind: PauseKind = "job", *, topic_channel: str | None = None
    ) -> bool:
        """Undo ``pause_queue`` and wake the queue's consumers (a topic's on
        ``topic_channel``, ``<prefix>_queue``; without it they resume at their next poll).
        Audited. Returns whether it was paused.

        Raises:
            BackendError, SchemaError: as for ``pause_queue``.
        """
        async with self._flow_store(topic_channel) as store:
            return await store.resume(self.actor, kind, queue)

    async def set_limits(
        self,
        queue: str,
        limits: Sequence[LimitSpec] | None,
        kind: Literal["job", "topic"] = "job",
        *,
        topic_channel: str | None = None,
    ) -> str:
        """Put ``limits`` (``queuey.limits.parse_limit`` spells them; a limit with a
        ``job_type`` limits that job type's rows) in place of ``queue``'s declared flow
        limits, for every process from its next claim on, until set again; ``None``: the
        declared limits again; ``[]``: no limit. Audited (who, when, old -> new). Returns
        ``"<old> -> <new>"``.

        Raises:
            BackendError, SchemaError: as for ``pause_queue``.
        """
        async with self._flow_store(topic_channel) as store:
            return await store.set_limits(self.actor, kind, queue, limits)

    async def unknown_names(
        self, queue: str, kind: Literal["job", "topic"] = "job", job_types: Sequence[str] = ()
    ) -> list[str]:
        """What of these names the queue table does not know, so that a typo in ``queuey queues
        pause|limit`` is caught: ``"queue"`` when no row (in any state), declared or set limit,
        or pause names ``queue``; then each of ``job_types`` no row of the queue has (it reads
        the queue's rows until it finds one of the type). Empty: every name is known.

        Raises:
            BackendError, SchemaError: as for ``pause_queue``.
        """
        async with self._flow_store(None) as store:
            return await store.unknown_names(kind, queue, job_types)

    async def flow_state(self) -> tuple[list[Pause], list[LimitsSet]]:
        """Every pause in force, and every queue whose limits were set at run time.

        Raises:
            BackendError, SchemaError: as for ``pause_queue``.
        """
        async with self._flow_store(None) as store:
            return await store.paused(), await store.limits_set()
