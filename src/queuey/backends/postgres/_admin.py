"""Operations on a live queuey table: per-queue status, inspecting, retrying and discarding
failed (or cancelled) rows, and cancelling a job (``queuey status``, ``queuey failed ...``,
``queuey jobs cancel``), and pausing or resuming a schedule (``queuey schedules pause``).
Each action writes a row to the audit log the dashboard shows, naming the actor (by default
``cli:<the operating-system user>``).

Every call opens one short connection (a store session), checks the schema version and runs
one named statement from ``sql/queries.sql`` through the store. Retry and discard are a single
``UPDATE``/``DELETE ... WHERE status = 'failed'``, so they are safe while workers run: a row a
worker holds is ``running``, never ``failed`` (nor ``cancelled``: a cancelled running row stays
``running`` until its run ends), and two operators racing on one row touch it
once. Times come from the database's clock.
"""

from __future__ import annotations

import getpass
import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal

from queuey._validation import check_int
from queuey.backends.base import CancelResult, JobInfo
from queuey.backends.batches import BatchProgress
from queuey.backends.postgres._admin_flow import AdminFlow
from queuey.backends.postgres._batches import batch_progress
from queuey.backends.postgres._cancel import cancel_channel, cancel_result
from queuey.backends.postgres._ids import parse_id
from queuey.backends.postgres._rows import FailedRow, Held, QueueStatus, RowDetail, Touched
from queuey.backends.postgres._sql import Statements, check_identifier
from queuey.backends.postgres._store import Store
from queuey.backends.postgres._workflow_ops import cancel_workflow, workflow_info, workflow_list
from queuey.backends.workflow_ops import WorkflowCancel, WorkflowInfo, WorkflowSummary
from queuey.queues import QueueConfig
from queuey.secrets import remember

__all__ = [
    "Admin",
    "FailedRow",
    "Held",
    "QueueStatus",
    "RowDetail",
    "Stopped",
    "Touched",
    "parse_id",
]

Stopped = Literal["failed", "cancelled"]
"""The terminal states a person looks after: listed, retried and discarded alike."""


def cli_actor() -> str:
    """Who acts from the command line, as the audit log names them: ``cli:<user>``."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no user name for this uid (a bare container)
        return "cli"


class Admin(AdminFlow):
    """Operations on one queuey table through short-lived connections.

    Args:
        conninfo: a libpq URL or key=value string.
        schema: the schema holding the table (validated identifier; default "queuey").
        table: the message table (default "queue_message").
        channel: the NOTIFY channel workers listen on (default ``<schema>_jobs``, the
            backend's default); a retry wakes them through it. Topic subscribers listen on
            ``<prefix>_queue`` and pick a retried row up on their next poll otherwise.
        connect_timeout: give up connecting after this many seconds (default 10; 0 waits
            as long as libpq does).

    Raises:
        ConfigError: a bad identifier or timeout (the message names it).
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "queuey",
        table: str = "queue_message",
        channel: str | None = None,
        connect_timeout: int = 10,
        actor: str | None = None,
    ) -> None:
        self.actor = actor or cli_actor()
        self.conninfo = remember(conninfo) or conninfo
        self.statements = Statements(schema, table)
        self.channel = check_identifier(channel or f"{schema}_jobs"[:63], "channel")
        self.connect_timeout = check_int(connect_timeout, "connect_timeout", low=0)
        self.cancel_channel = cancel_channel(schema)
        self._store = Store(self.statements, self.conninfo)

    def _session(self) -> AbstractAsyncContextManager[Store]:
        """A short connection whose schema was checked."""
        return self._store.session(connect_timeout=self.connect_timeout)

    async def status(self) -> list[QueueStatus]:
        """Per (kind, queue) counts of live rows, ordered by kind then queue.

        Raises:
            BackendError: the database cannot be reached or the query failed.
            SchemaError: the schema is missing or older than this version needs.
        """
        async with self._session() as store:
            return await store.ops_status()

    async def held_back(self, configs: Sequence[QueueConfig]) -> list[tuple[int, int]]:
        """For each of ``configs`` (queues with flow limits, their job types' included): how
        many due rows its concurrency caps and its rate limits hold back now, as a claim
        would count them among its oldest 200 due rows (read-only; a row held by both kinds
        counts in both; a queue without limits reads ``(0, 0)``).

        Raises:
            BackendError: the database cannot be reached or the query failed.
            SchemaError: the schema is missing or older than this version needs.
        """
        async with self._session() as store:
            return [await store.flow_held(c) if c.limits else (0, 0) for c in configs]

    async def failed(
        self, queue: str | None = None, *, limit: int | None = 100, status: Stopped = "failed"
    ) -> list[FailedRow]:
        """Failed rows (or cancelled ones), oldest first.

        Args:
            queue: only this queue (any kind); ``None`` for all.
            limit: at most this many rows; ``None`` for all.
            status: ``"failed"`` (default) or ``"cancelled"``.

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            return await store.ops_failed(queue, limit, status)

    async def show(self, row_id: str | uuid.UUID) -> RowDetail | None:
        """One row by id, whatever its status; ``None`` when there is no such row.

        Raises:
            ConfigError: ``row_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        row_id = parse_id(row_id)
        async with self._session() as store:
            return await store.ops_show(row_id)

    async def job(self, job_id: str | uuid.UUID) -> JobInfo | None:
        """One job (or topic message) by id, whatever its state; ``None`` when there is none.

        Raises:
            ConfigError: ``job_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        job_id = parse_id(job_id)
        async with self._session() as store:
            return await store.job_info(job_id)

    async def queue_exists(self, queue: str) -> bool:
        """Whether any row (of any status) is on ``queue``.

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            return await store.queue_exists(queue)

    async def retry(
        self, row_id: str | uuid.UUID, *, queue: str | None = None, status: Stopped = "failed"
    ) -> list[Touched]:
        """Put one failed row back to pending: due now, ``attempts``, ``redeliveries`` and
        ``deferrals`` 0, its last error kept, its workers woken. A row that is not failed is
        left alone: a running one (cancelled while it runs included: it stays running until its
        run ends) is never retried while its run goes on (``show`` tells its status). A unique
        job takes its key back; when another job holds that key, the row is left alone too
        (retrying it would run the key twice): ``held`` says which job. A workflow step that
        never ran (an upstream step failed, or it was cancelled while waiting: its input was
        never built) is left alone as well (``held`` names it, ``never_built``); retrying the
        failed step it names makes it (and every step that failed only because that step did)
        wait again, and the workflow goes on once that step succeeds.

        Args:
            row_id: the row's id.
            queue: act only if the row is on this queue.
            status: the state the row must be in: ``"failed"`` or ``"cancelled"``.

        Returns:
            One ``Touched`` with count 1, or an empty list when nothing matched.

        Raises:
            ConfigError: ``row_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        row_id = parse_id(row_id)
        async with self._session() as store:
            touched = await store.ops_retry(row_id, queue, self.channel, status)
            await self._audit(store, "retry", touched, queue, row_id, status)
            return touched

    async def retry_all(
        self, *, queue: str | None = None, status: Stopped = "failed"
    ) -> list[Touched]:
        """Like ``retry`` for every row of ``status`` (of ``queue`` when given); counts per
        queue. Of several rows of one unique key, only the newest goes back; the others, and
        any whose key another job holds, are left alone (``held`` lists them).

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            touched = await store.ops_retry(None, queue, self.channel, status)
            await self._audit(store, "bulk retry", touched, queue, None, status)
            return touched

    async def held(
        self,
        row_id: str | uuid.UUID | None = None,
        *,
        queue: str | None = None,
        status: Stopped = "failed",
    ) -> list[Held]:
        """The rows of ``status`` (this one, of ``queue`` when given) that a retry leaves
        alone because another job holds their unique key, with that job (at most 100).

        Raises:
            ConfigError: ``row_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        found = None if row_id is None else parse_id(row_id)
        async with self._session() as store:
            return await store.ops_held(found, queue, status)

    async def discard(
        self, row_id: str | uuid.UUID, *, queue: str | None = None, status: Stopped = "failed"
    ) -> list[Touched]:
        """Delete one failed (or, with ``status``, cancelled) row (only if on ``queue`` when
        given); a row in another state is left alone (a running one is never discarded while
        its run goes on).

        Returns:
            One ``Touched`` with count 1, or an empty list when nothing matched.

        Raises:
            ConfigError: ``row_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        row_id = parse_id(row_id)
        async with self._session() as store:
            touched = await store.ops_discard(row_id, queue, status)
            await self._audit(store, "discard", touched, queue, row_id, status)
            return touched

    async def discard_all(
        self, *, queue: str | None = None, status: Stopped = "failed"
    ) -> list[Touched]:
        """Delete every row of ``status`` (of ``queue`` when given); counts per queue.

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            touched = await store.ops_discard(None, queue, status)
            await self._audit(store, "bulk discard", touched, queue, None, status)
            return touched

    async def cancel(self, row_id: str | uuid.UUID) -> CancelResult:
        """Cancel one job: pending or scheduled, it becomes ``cancelled``; running, its cancel is
        asked for and its worker told on ``<schema>_cancel``: the row stays ``running``, held by
        that worker, until the run ends (its handler sees ``ctx.cancelled``; an async one is
        stopped after the worker's ``cancel_grace``), then becomes ``cancelled`` (any other
        outcome of the run is refused). If that worker is gone, the row becomes ``cancelled``
        when its lease expires.

        Returns:
            ``"cancelled"``, ``"requested"`` (it was running) or ``"not_found"``.

        Raises:
            ConfigError: ``row_id`` is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        row_id = parse_id(row_id)
        async with self._session() as store:
            result = cancel_result(await store.cancel(row_id, self.cancel_channel))
            count = 0 if result == "not_found" else 1
            await store.record_action(self._action("cancel", job_id=row_id, count=count))
            return result

    async def workflows(self, limit: int = 50) -> list[WorkflowSummary]:
        """The ``limit`` most recently enqueued workflows, newest first (``queuey workflows
        list``).

        Raises:
            ConfigError: ``limit`` is not a whole number from 1.
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            return await workflow_list(store, limit)

    async def workflow(self, workflow_id: str | uuid.UUID) -> WorkflowInfo | None:
        """Workflow ``workflow_id`` (or that of the step with that job id) step by step
        (``queuey workflows show``); ``None`` when there is none.

        Raises:
            ConfigError: the id is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            return await workflow_info(store, parse_id(workflow_id))

    async def batch(self, batch_id: str | uuid.UUID) -> BatchProgress | None:
        """Batch ``batch_id``'s counts (``queuey workflows batch``); ``None`` when there is none.

        Raises:
            ConfigError: the id is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            return await batch_progress(store, str(batch_id))

    async def cancel_workflow(self, workflow_id: str | uuid.UUID) -> WorkflowCancel:
        """Cancel workflow ``workflow_id`` (or that of the step with that job id): its pending
        and waiting steps end ``cancelled``; each running one is told as ``cancel`` tells it
        (``queuey workflows cancel``). Audited as "cancel workflow".

        Raises:
            ConfigError: the id is not a UUID.
            BackendError, SchemaError: as for ``status``.
        """
        found = parse_id(workflow_id)
        async with self._session() as store:
            done = await cancel_workflow(store, found, self.cancel_channel)
            count = done.cancelled + done.requested
            action = self._action("cancel workflow", filter=f"workflow {found}", count=count)
            await store.record_action(action)
            return done

    async def set_schedule_paused(self, name: str, paused: bool) -> bool:
        """Pause (or resume) schedule ``name`` for every worker; audited with the schedule's
        name as the queue. Returns ``False`` when there is no such schedule.

        Raises:
            BackendError, SchemaError: as for ``status``.
        """
        async with self._session() as store:
            found = await store.pause_schedule(name, paused)
            action = "pause schedule" if paused else "resume schedule"
            await store.record_action(self._action(action, queue=name, count=int(found)))
            return found

    async def _audit(
        self,
        store: Store,
        action: str,
        touched: Sequence[Touched],
        queue: str | None,
        row_id: str | None,
        status: Stopped,
    ) -> None:
        kinds = {t.kind for t in touched}
        await store.record_action(
            self._action(
                action,
                kind=kinds.pop() if len(kinds) == 1 else None,
                queue=queue or (touched[0].queue if row_id and touched else None),
                job_id=row_id,
                filter=f"status={status}",
                count=sum(t.count for t in touched),
            )
        )

    def _action(self, action: str, **fields: Any) -> dict[str, Any]:
        """The parameters of ``record_action``: every column, ``None`` unless given."""
        row = {"kind": None, "queue": None, "job_id": None, "filter": "", "count": 0}
        return {**row, **fields, "actor": self.actor, "action": action}
