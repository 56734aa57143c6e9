"""The dashboard's reads and actions on PostgreSQL: ``PgDashboardStore``.

Statements come from ``sql/dashboard.sql`` by name, composed once with the message table, the
schedules table of migration 0002, the audit and pause tables of 0004 and the sign-out and bulk
tables of 0006 as quoted identifiers. Rows are read by column name into the dataclasses of
``_dashboard_rows``. Connections come from a small pool of its own, autocommit and never
prepared (each statement is planned with its real parameters, so an optional filter never
leaves a generic plan that ignores an index). Every action is one statement, so its change,
its audit row and its notification commit together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from typing import Any, TypeVar

from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from queuey.backends import dashboard_store as rows
from queuey.backends.dashboard_store import (
    AuditEntry,
    ConfirmationGone,
    FanOutRow,
    JobDetail,
    JobFilter,
    JobPage,
    JobSummary,
    Minute,
    Pause,
    QueueRef,
    QueueSummary,
    TopicRow,
)
from queuey.backends.postgres._cancel import cancel_channel
from queuey.backends.postgres._dashboard_flow import FlowActions
from queuey.backends.postgres._dashboard_reads import StatementReads
from queuey.backends.postgres._errors import database_errors
from queuey.backends.postgres._rows import attempt_errors
from queuey.backends.postgres._sql import Statements, check_identifier, statement_texts
from queuey.backends.postgres._store import Store
from queuey.backends.postgres._workflow_ops import DashboardWorkflows
from queuey.secrets import remember

__all__ = ["OVERVIEW_BUDGET", "SCAN_BUDGET", "PgDashboardStore"]

OVERVIEW_BUDGET = 60_000
"""The overview reads at most about this many index entries per state (running, failed, done),
shared between the queues: each queue's counts stop at ``max(1000, budget / queues)``."""
SCAN_BUDGET = 2_000
"""A filtered job list reads at most this many index entries per page."""


_R = TypeVar("_R")


@cache
def _raw_statements() -> dict[str, str]:
    return statement_texts("dashboard.sql")  # with the parts of queries.sql it uses


def dashboard_names(schema: str, table: str) -> dict[str, sql.Composable]:
    """The identifiers ``dashboard.sql`` is composed with, named as the migrations name them."""
    schema, table = check_identifier(schema, "schema"), check_identifier(table, "table")
    names: dict[str, sql.Composable] = {"table": sql.Identifier(schema, table)}
    suffixes = ("audit", "paused", "signed_out", "bulk", "schedules", "workflow_edges", "batches")
    for suffix in (*suffixes, "flow_set", "flow_declared"):
        names[suffix] = sql.Identifier(schema, f"{table}_{suffix}"[:63])
    return names


class PgDashboardStore(StatementReads, FlowActions, DashboardWorkflows):
    """What the dashboard reads and does, on one queuey table (a ``DashboardStore``).

    Args:
        conninfo: a libpq URL or key=value string.
        schema: the schema holding the table (default ``"queuey"``).
        table: the message table (default ``"queue_message"``).
        job_channel: the NOTIFY channel typed-job workers listen on (default
            ``<schema>_jobs``, the backend's default); a retry wakes them through it.
        topic_channel: the channel topic subscribers listen on (their app's
            ``[queues] prefix`` + ``_queue``; default ``queuey_queue``).
        pool_size: connections at most (default 4).

    Raises:
        ConfigError: a schema, table or channel that is not a usable identifier.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "queuey",
        table: str = "queue_message",
        job_channel: str | None = None,
        topic_channel: str = "queuey_queue",
        pool_size: int = 4,
    ) -> None:
        self.conninfo = remember(conninfo) or conninfo
        self.schema, self.table = schema, table
        names = dashboard_names(schema, table)
        self._statements = {
            name: sql.SQL(body).format(**names) for name, body in _raw_statements().items()
        }
        self._checks = Statements(schema, table)
        self.job_channel = check_identifier(job_channel or f"{schema}_jobs"[:63], "channel")
        self.topic_channel = check_identifier(topic_channel, "channel")
        self.cancel_channel = cancel_channel(schema)
        self._pool = AsyncConnectionPool(
            self.conninfo,
            min_size=1,
            max_size=pool_size,
            open=False,
            kwargs={
                "autocommit": True,
                "prepare_threshold": None,
                "application_name": "queuey-dashboard",
            },
        )
        self._opened = False

    def statement(self, name: str) -> sql.Composed:
        """The composed statement ``name`` of ``dashboard.sql`` (for EXPLAIN in tests)."""
        return self._statements[name]

    async def open(self) -> None:
        """Connect and check the schema. Idempotent.

        Raises:
            BackendError: the database cannot be reached.
            SchemaError: the schema is older than this version needs.
        """
        if self._opened:
            return
        async with Store(self._checks, self.conninfo).session():
            pass  # refuses a schema older than this version needs
        with database_errors():
            await self._pool.open(wait=True, timeout=10)
        self._opened = True

    async def close(self) -> None:
        """Close the pool. Idempotent."""
        await self._pool.close()
        self._opened = False

    async def __aenter__(self) -> PgDashboardStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- reads -------------------------------------------------------------------------------

    async def queues(self) -> list[QueueRef]:
        """Every queue with rows or a pause, by kind then name."""
        return await self._rows("queues", {}, QueueRef)

    async def overview(self, budget: int = OVERVIEW_BUDGET) -> list[QueueSummary]:
        """Per queue counts and pause state; running, failed and done counts stop at each
        row's ``cap`` (``budget`` shared between the queues, at least 1000 each)."""
        refs = await self.queues()
        cap = max(1000, budget // max(len(refs), 1))
        params = {"kinds": [r.kind for r in refs], "queues": [r.queue for r in refs], "cap": cap}
        return await self._rows("overview", params, QueueSummary)

    async def throughput(self) -> list[Minute]:
        """Rows done and failed in each of the last 60 minutes, oldest first."""
        return await self._rows("throughput", {}, Minute)

    async def jobs(
        self, where: JobFilter, *, before: int | None = None, limit: int = 50
    ) -> JobPage:
        """One page of rows matching ``where``, newest first, older than seq ``before``.

        Without a job type or text filter the page reads ``limit`` index entries; with one it
        reads at most ``SCAN_BUDGET`` and says so (``exhausted``) when it stopped there.
        """
        filtered = where.job_type is not None or bool(where.text) or where.status == "scheduled"
        scan = SCAN_BUDGET if filtered else limit + 1
        params: dict[str, Any] = {
            "kind": where.kind,
            "queue": where.queue,
            "status": "pending" if where.status == "scheduled" else where.status,
            "due": {"pending": None, "scheduled": False}.get(where.status),
            "job_type": where.job_type,
            "text": where.text,
            "before": before if before is not None else 2**63 - 1,
            "scan": scan,
            "limit": limit + 1,
        }
        name = "list_all" if where.kind is None else "list_queue"
        rows = await self._rows(name, params, JobSummary)
        if len(rows) > limit:
            return JobPage(rows[:limit], rows[limit - 1].seq, rows[0].scanned, False)
        exhausted = bool(rows) and rows[0].scanned >= scan
        if not rows and filtered:
            return await self._empty_page(name, params, scan)
        return JobPage(rows, rows[0].scan_floor if exhausted else None, len(rows), exhausted)

    async def _empty_page(self, name: str, params: dict[str, Any], scan: int) -> JobPage:
        """Nothing matched: ask how far an unfiltered read of the same budget reaches."""
        bounds = {**params, "job_type": None, "due": None, "text": "", "limit": 1}
        first = await self._rows(name, bounds, JobSummary)
        if not first or first[0].scanned < scan:
            return JobPage([], None, first[0].scanned if first else 0, False)
        return JobPage([], first[0].scan_floor, first[0].scanned, True)

    async def job(self, job_id: str) -> JobDetail | None:
        """One row by id (a UUID string), ``None`` when there is no such row."""
        rows = await self._rows("job", {"id": job_id}, JobDetail)
        return replace(rows[0], errors=attempt_errors(rows[0].errors)) if rows else None

    async def fan_out(self, detail: JobDetail) -> list[FanOutRow]:
        """The rows of ``detail``'s publication, one per subscriber ([] for a typed job)."""
        if detail.kind != "topic":
            return []
        params = {
            "queue": detail.queue,
            "seq": detail.seq,
            "created_at": detail.created_at,
            "published_by": detail.published_by,
        }
        return await self._rows("fan_out", params, FanOutRow)

    async def publications(
        self, topic: str, *, before: int | None = None, limit: int = 200
    ) -> list[TopicRow]:
        """A topic's newest rows (every status) older than seq ``before``, at most ``limit``."""
        params = {"topic": topic, "before": before or 2**63 - 1, "limit": limit}
        return await self._rows("publications", params, TopicRow)

    async def audit(self, *, before: int | None = None, limit: int = 50) -> list[AuditEntry]:
        """Recorded actions, newest first, older than id ``before``."""
        params = {"before": before or 2**63 - 1, "limit": limit}
        return await self._rows("audit", params, AuditEntry)

    async def schedules(self) -> list[rows.ScheduleRow]:
        """Every schedule workers registered, by name."""
        return await self._rows("schedules", {}, rows.ScheduleRow)

    async def unique_keys(self, limit: int = 200) -> list[rows.UniqueKeyRow]:
        """The unique keys rows hold now, in key order, at most ``limit``."""
        return await self._rows("unique_keys", {"limit": limit}, rows.UniqueKeyRow)

    async def paused(self) -> list[Pause]:
        """Every paused queue and topic app."""
        return await self._rows("paused", {}, Pause)

    # -- actions -----------------------------------------------------------------------------

    async def retry(
        self,
        actor: str,
        *,
        job_id: str | None = None,
        where: JobFilter | None = None,
        token: str | None = None,
    ) -> int:
        """Put failed rows back to pending (due now) and wake their workers; audited.

        Args:
            actor: who acts (a principal id), recorded in the audit log.
            job_id: one row (a UUID string); or
            where: every failed row of this filter (its status is ignored) among the rows
                that ``bulk_snapshot`` counted under ``token`` (taken once).

        Returns:
            How many rows went back to pending (0 when the row is not failed).

        Raises:
            ConfirmationGone: ``token`` was used, is past its time or is another actor's.
        """
        params = self._action_params(actor, "retry", job_id, where, token)
        params |= {"job_channel": self.job_channel, "topic_channel": self.topic_channel}
        return self._counted(await self._execute("retry", params), token)

    async def discard(
        self,
        actor: str,
        *,
        job_id: str | None = None,
        where: JobFilter | None = None,
        token: str | None = None,
    ) -> int:
        """Delete failed rows (one row, or every failed row of ``where`` among those counted
        under ``token``, as for ``retry``); audited.

        Returns:
            How many rows were deleted.

        Raises:
            ConfirmationGone: as for ``retry``.
        """
        params = self._action_params(actor, "discard", job_id, where, token)
        return self._counted(await self._execute("discard", params), token)

    async def bulk_snapshot(
        self, actor: str, action: str, where: JobFilter, token: str, secs: float
    ) -> int:
        """Remember which failed rows ``where`` matches now, for ``actor``'s bulk ``action``
        (``"retry"`` or ``"discard"``) confirmed with ``token`` within ``secs`` seconds.

        Returns:
            How many rows it counted (what the confirmation page shows).
        """
        params = self._action_params(actor, action, None, where, token) | {"secs": secs}
        rows = await self._execute("bulk_snapshot", params)
        return int(rows[0][0])

    async def sign_out(self, session: str, until: float) -> None:
        """Record the browser session ``session`` as signed out, for every process, until
        ``until`` (seconds since the epoch; when it would have ended anyway)."""
        await self._execute("sign_out", {"session": session, "until": until})

    async def signed_out(self, session: str) -> bool:
        """Whether the browser session ``session`` was signed out."""
        rows = await self._execute("signed_out", {"session": session})
        return bool(rows[0][0])

    async def never_built(self, job_id: str) -> bool:
        """Whether ``job_id`` is a workflow step that never ran (its input was never built); a
        retry leaves it alone."""
        return bool(await self._execute("never_built", {"id": job_id}))

    async def key_holder(self, job_id: str) -> str | None:
        """The id of the job, other than ``job_id``, holding ``job_id``'s unique key (a
        retry of ``job_id`` leaves it alone then); ``None`` when none does."""
        rows = await self._execute("key_holder", {"id": job_id})
        return str(rows[0][0]) if rows else None

    async def cancel(self, actor: str, job_id: str) -> int:
        """Cancel one pending (due or scheduled) or running job, or a waiting workflow step,
        by the statement ``queuey jobs cancel`` runs: the steps after a cancelled step fail
        with it or get its error; a running job's worker is told through a NOTIFY on
        ``<schema>_cancel`` and its late outcome is refused. Audited.

        Returns:
            1 when the job was cancelled (or, running, told to stop), 0 when it was not
            pending, waiting or running.
        """
        channels = {"channel": self.cancel_channel, "wake_channel": self.job_channel}
        rows = await self._execute("cancel", {"actor": actor, "id": job_id, **channels})
        return int(rows[0][0]) if rows else 0

    @staticmethod
    def _action_params(
        actor: str, action: str, job_id: str | None, where: JobFilter | None, token: str | None
    ) -> dict[str, Any]:
        if (job_id is None) == (where is None) or (where is None) != (token is None):
            raise ValueError("give a job_id, or a where filter with its confirmation token")
        if where is None:
            where, action_name = JobFilter(), action
            described = ""
        else:
            action_name = f"bulk {action}"
            failed = JobFilter("failed", where.kind, where.queue, where.job_type, where.text)
            described = failed.describe()
        return {
            "actor": actor,
            "action": action_name,
            "id": job_id,
            "token": token,
            "kind": where.kind,
            "queue": where.queue,
            "job_type": where.job_type,
            "text": where.text,
            "filter": described,
        }

    @staticmethod
    def _counted(rows: Sequence[tuple[Any, ...]], token: str | None) -> int:
        count, found = int(rows[0][0]), int(rows[0][-1])  # first column count, last found
        if token is not None and not found:
            raise ConfirmationGone(token)
        return count
