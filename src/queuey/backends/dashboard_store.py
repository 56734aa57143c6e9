"""The dashboard's contract with a backend: the rows it reads, one dataclass per query shape,
and ``DashboardStore``, what it asks of the store that reads them.

``queuey.backends.postgres.PgDashboardStore`` implements it (reading every row by column name,
never by position). Times are aware datetimes from the database's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from queuey.attempts import AttemptError
from queuey.backends.flow_view import FlowQueue, LimitsSet
from queuey.backends.workflow_ops import DashboardWorkflowStore
from queuey.limits import LimitSpec

__all__ = [
    "AuditEntry",
    "ConfirmationGone",
    "DashboardStore",
    "FanOutRow",
    "JobDetail",
    "JobFilter",
    "JobPage",
    "JobSummary",
    "Minute",
    "LimitsSet",
    "Pause",
    "QueueRef",
    "QueueSummary",
    "ScheduleRow",
    "TopicRow",
    "UniqueKeyRow",
]

STATUSES = ("pending", "scheduled", "running", "failed", "cancelled", "done")
"""The states a job list shows; ``scheduled`` is a pending row not yet due."""


@dataclass(frozen=True)
class QueueRef:
    """A queue: its face (``job`` or ``topic``) and its name."""

    kind: str
    queue: str


@dataclass(frozen=True)
class QueueSummary:
    """One queue on the overview.

    Attributes:
        kind, queue: which queue.
        cap: the most rows a running, failed or done count reads (a count equal to it means
            "at least that many").
        due: pending rows due now; scheduled: pending rows not yet due.
        oldest_secs: how long the oldest due row has waited (seconds), ``None`` when none.
        running, failed, done: rows in each state, each counted up to the overview's cap.
        paused: an operator paused the queue.
    """

    kind: str
    queue: str
    cap: int
    due: int
    scheduled: int
    oldest_secs: float | None
    running: int
    failed: int
    done: int
    paused: bool


@dataclass(frozen=True)
class Minute:
    """Rows done and rows failed during one minute (``minute`` is its start)."""

    minute: datetime
    done: int
    failed: int


@dataclass(frozen=True)
class JobFilter:
    """What a job list shows.

    Attributes:
        status: one of ``STATUSES``.
        kind, queue: one queue, or both ``None`` for every queue.
        job_type: only this job type (or topic subscriber), ``None`` for any.
        text: only rows whose id, job type, error or payload contains it (case-insensitive);
            ``""`` for all.
    """

    status: str = "failed"
    kind: str | None = None
    queue: str | None = None
    job_type: str | None = None
    text: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status: {self.status!r} is not one of {', '.join(STATUSES)}")
        if (self.kind is None) != (self.queue is None):
            raise ValueError("give both kind and queue, or neither")
        if self.kind not in (None, "job", "topic"):
            raise ValueError(f"kind: {self.kind!r} is not job or topic")

    def describe(self) -> str:
        """The filter in words, for the audit log: ``"failed job:emails type=Send text='x'"``."""
        parts = [self.status]
        if self.kind is not None:
            parts.append(f"{self.kind}:{self.queue}")
        if self.job_type is not None:
            parts.append(f"type={self.job_type}")
        if self.text:
            parts.append(f"text={self.text!r}")
        return " ".join(parts)


@dataclass(frozen=True)
class JobSummary:
    """One row of a job list (``error`` is the first line of the last error, "" when none).

    ``scan_floor`` and ``scanned`` say how far the page's index read went (internal).
    """

    seq: int
    id: str
    kind: str
    queue: str
    job_type: str
    status: str
    attempts: int
    available_at: datetime
    processed_at: datetime | None
    claimed_by: str | None
    error: str
    scan_floor: int
    scanned: int


@dataclass(frozen=True)
class JobPage:
    """One page of a job list.

    Attributes:
        rows: the matching rows, newest first.
        before: the keyset cursor of the next (older) page, ``None`` when there is none.
        scanned: rows read to build the page (at most the scan budget).
        exhausted: the read stopped at the scan budget before filling the page: older rows
            may still match (the page says so and links to them).
    """

    rows: list[JobSummary]
    before: int | None
    scanned: int
    exhausted: bool


@dataclass(frozen=True)
class JobDetail:
    """Everything about one row. ``payload`` and ``headers`` are the stored JSON text;
    ``errors`` every failed attempt's error, oldest first."""

    id: str
    seq: int
    kind: str
    queue: str
    job_type: str
    status: str
    priority: int
    attempts: int
    redeliveries: int
    deferrals: int
    payload: str
    headers: str
    published_by: str
    enqueued_at_ms: int
    created_at: datetime
    available_at: datetime
    expires_at: datetime | None
    claimed_at: datetime | None
    claimed_by: str | None
    lease_until: datetime | None
    processed_at: datetime | None
    error: str | None
    errors: tuple[AttemptError, ...] = ()
    progress: str | None = None
    """The last progress its handler reported (JSON text), ``None`` when none."""
    result: str | None = None
    """A done job's stored result (JSON text), ``None`` when none."""


@dataclass(frozen=True)
class FanOutRow:
    """One subscriber's row of a publication."""

    id: str
    job_type: str
    status: str
    attempts: int
    processed_at: datetime | None
    error: str
    seq: int


@dataclass(frozen=True)
class TopicRow:
    """One row of a topic, as the publications page groups them."""

    seq: int
    id: str
    job_type: str
    status: str
    attempts: int
    published_by: str
    created_at: datetime
    processed_at: datetime | None
    error: str


@dataclass(frozen=True)
class AuditEntry:
    """One recorded action: who (``actor``), what, when (``at``), on what, how many rows."""

    id: int
    at: datetime
    actor: str
    action: str
    kind: str | None
    queue: str | None
    job_id: str | None
    filter: str
    count: int


@dataclass(frozen=True)
class Pause:
    """A paused queue (kind ``job``/``topic``) or topic app (kind ``app``, queue = prefix)."""

    kind: str
    queue: str
    paused_by: str
    paused_at: datetime


@dataclass(frozen=True)
class ScheduleRow:
    """A registered schedule: its timing (cron expression or ``every <n>s``, IANA zone), the
    last slot fired, when, and the job it enqueued, and whether it is paused."""

    name: str
    expression: str
    tz: str
    last_slot: datetime | None
    last_fired_at: datetime | None
    last_job_id: str | None
    paused: bool


@dataclass(frozen=True)
class UniqueKeyRow:
    """A unique key held now, and the row (job or topic message) holding it."""

    unique_key: str
    id: str
    kind: str
    queue: str
    job_type: str
    status: str
    created_at: datetime


class ConfirmationGone(Exception):
    """A bulk action's confirmation was already used, is past its time, or is someone else's."""


class DashboardStore(DashboardWorkflowStore, Protocol):
    """What the dashboard reads and does, on one backend's stored jobs.

    Every action taking an ``actor`` (the signed-in name the dashboard shows) writes an audit
    entry. Counts returned by actions are the rows the action changed.
    """

    async def open(self) -> None:
        """Connect (idempotent)."""

    async def close(self) -> None:
        """Disconnect (idempotent)."""

    async def queues(self) -> list[QueueRef]:
        """Every queue and topic that holds rows."""

    async def overview(self) -> list[QueueSummary]:
        """Counts per queue by state (capped counts say so)."""

    async def throughput(self) -> list[Minute]:
        """Rows ended per minute over the last hour."""

    async def jobs(
        self, where: JobFilter, *, before: int | None = None, limit: int = 50
    ) -> JobPage:
        """One page of jobs matching ``where``, newest first, older than ``before`` (a ``seq``)."""

    async def job(self, job_id: str) -> JobDetail | None:
        """One job by id, or ``None``."""

    async def fan_out(self, detail: JobDetail) -> list[FanOutRow]:
        """The deliveries of a published topic message (empty for a typed job)."""

    async def publications(
        self, topic: str, *, before: int | None = None, limit: int = 200
    ) -> list[TopicRow]:
        """A topic's published messages, newest first."""

    async def audit(self, *, before: int | None = None, limit: int = 50) -> list[AuditEntry]:
        """The audit log, newest first."""

    async def schedules(self) -> list[ScheduleRow]:
        """Every stored schedule with its next slot."""

    async def unique_keys(self, limit: int = 200) -> list[UniqueKeyRow]:
        """Unique keys held now, and by which job."""

    async def paused(self) -> list[Pause]:
        """Every pause in force."""

    async def retry(
        self,
        actor: str,
        *,
        job_id: str | None = None,
        where: JobFilter | None = None,
        token: str | None = None,
    ) -> int:
        """Retry one failed or cancelled job, or every one ``where`` matches (``token`` from
        ``bulk_snapshot``). Raises ``ConfirmationGone`` for a used or stale ``token``."""

    async def discard(
        self,
        actor: str,
        *,
        job_id: str | None = None,
        where: JobFilter | None = None,
        token: str | None = None,
    ) -> int:
        """Delete one failed or cancelled job, or every one ``where`` matches (as ``retry``)."""

    async def bulk_snapshot(
        self, actor: str, action: str, where: JobFilter, token: str, secs: float
    ) -> int:
        """Record a bulk ``action`` over ``where`` to be confirmed with ``token`` within ``secs``
        seconds; returns how many rows it counted."""

    async def sign_out(self, session: str, until: float) -> None:
        """Revoke a dashboard session until ``until`` (Unix seconds)."""

    async def signed_out(self, session: str) -> bool:
        """Whether a session was revoked."""

    async def never_built(self, job_id: str) -> bool:
        """Whether a job is a workflow step whose input was never built."""

    async def key_holder(self, job_id: str) -> str | None:
        """The id of the job holding the unique key a retry of ``job_id`` needs, if any."""

    async def cancel(self, actor: str, job_id: str) -> int:
        """Cancel a pending job or waiting workflow step, or ask a running one to stop; 1
        when it did, else 0."""

    async def pause(self, actor: str, kind: str, queue: str) -> bool:
        """Pause a queue (``kind`` ``job``/``topic``/``app``); whether it was not paused yet."""

    async def resume(self, actor: str, kind: str, queue: str) -> bool:
        """Resume a paused queue; whether it was paused."""

    async def set_limits(
        self, actor: str, kind: str, queue: str, limits: Sequence[LimitSpec] | None
    ) -> str:
        """Put ``limits`` in place of the queue's declared flow limits from the next claim of
        every process on (``None``: the declared ones again); audited. Returns what changed,
        ``"<old> -> <new>"``."""

    async def limits_set(self) -> list[LimitsSet]:
        """Every queue whose limits were set at run time."""

    async def flow_view(self) -> list[FlowQueue]:
        """Every queue with flow limits and what each limit holds back now, per key."""
