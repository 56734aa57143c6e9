"""The rows the store returns, as frozen dataclasses, and the row factories that decode them.

Every row is decoded by column name: the statements in ``sql/queries.sql`` name their columns
after these fields. ``class_row`` (psycopg) builds the rows read now and then; the claim, read
for every job, has its own factory (``claim_rows``) that finds its columns by name once per
result and then builds each row's ``Envelope`` directly (``Envelope.trusted``: the columns'
types are the fields' types, so pydantic's validation is skipped) and no intermediate object.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import AsyncRowFactory, RowMaker, no_result
from pydantic_core import from_json

from queuey.attempts import AttemptError
from queuey.backends.base import JobInfo, Progress, QueueDepth
from queuey.envelope import PUBLISHED_BY, Envelope, Kind
from queuey.queues import QueueConfig
from queuey.unique import EnqueueOutcome

__all__ = [
    "Claim",
    "ClaimRow",
    "Claimed",
    "json_value",
    "DeadRow",
    "EndRow",
    "Enqueued",
    "FirstUse",
    "FailedRow",
    "Held",
    "QueueStatus",
    "Reclaimed",
    "RowDetail",
    "Touched",
    "attempt_errors",
    "claim_rows",
    "job_info",
    "with_errors",
]


@dataclass(frozen=True, slots=True)
class Claim:
    """One row a claim took: the envelope it carries and its place in claim order."""

    envelope: Envelope
    position: int
    waited: float = 0.0
    """Seconds the row was due before it was claimed."""

    @property
    def row_id(self) -> str:
        """The row's id (the job's id)."""
        return self.envelope.job_id

    @property
    def suspect(self) -> bool:
        """The row already lost a lease: it may kill its worker (it is claimed alone)."""
        return self.envelope.redeliveries > 0


@dataclass(frozen=True, slots=True)
class Claimed:
    """What one claim statement brought: the rows it took, in claim order, and, when it took
    fewer than it asked for, the seconds until the queue's next row falls due (``None``: a full
    claim, nothing scheduled, or the queue paused; 0 when one is due now)."""

    claims: list[Claim]
    due_in: float | None


@dataclass(frozen=True, slots=True)
class Enqueued:
    """One row of ``publish_unique``: the id written or found, and what the statement did
    (``"inserted"``, ``"replaced"`` or ``"skipped"``)."""

    id: str
    outcome: EnqueueOutcome


@dataclass(frozen=True, slots=True)
class FirstUse:
    """The row of ``publish_once``: the key's first publication, and whether it is this one."""

    ids: list[str]
    fingerprint: str
    fresh: bool


@dataclass(frozen=True, slots=True)
class Reclaimed:
    """A row whose lease expired: back to ``pending``, or ``failed`` after too many."""

    id: str
    status: str


@dataclass(frozen=True, slots=True)
class EndRow:
    """How one awaited job stands (``job_ends``): its status, last error and result (JSON
    text, ``None`` when none was stored)."""

    id: str
    status: str
    error: str | None
    result: str | None


@dataclass(frozen=True, slots=True)
class DeadRow:
    """A failed row of one queue, with the reason it failed ("" when none)."""

    id: str
    job_type: str
    attempts: int
    deferrals: int
    priority: int
    payload: Any
    headers: dict[str, str]
    published_by: str
    enqueued_at_ms: int
    reason: str

    def envelope(self, kind: Kind, queue: str) -> Envelope:
        """The envelope the row holds (``queue`` of ``kind``)."""
        headers = dict(self.headers)
        if self.published_by:
            headers[PUBLISHED_BY] = self.published_by
        return Envelope(
            job_id=self.id,
            job_type=self.job_type,
            queue=queue,
            attempt=max(self.attempts, 1),
            enqueued_at_ms=self.enqueued_at_ms,
            deferrals=self.deferrals,
            priority=self.priority,
            payload=self.payload,
            headers=headers,
            kind=kind,
        )


QueueStatus = QueueDepth
"""The live rows of one queue (``queuey status``): the contract's ``QueueDepth``."""


@dataclass(frozen=True)
class FailedRow:
    """One failed row, summarised.

    Attributes:
        id: the row's (job's) id, a UUID string.
        kind: ``"job"`` or ``"topic"``.
        queue: the queue (or topic) name.
        job_type: the job's name (or the topic's subscriber).
        attempts: runs started.
        processed_at: when it failed (aware datetime; ``None`` if never recorded).
        error: the first line of its last error ("" when none).
    """

    id: str
    kind: Kind
    queue: str
    job_type: str
    attempts: int
    processed_at: datetime | None
    error: str


@dataclass(frozen=True)
class RowDetail:
    """Everything an operator needs to judge one row.

    Attributes:
        id, kind, queue, job_type: as in ``FailedRow``.
        status: ``pending``, ``running``, ``done`` or ``failed``.
        priority: the row's priority.
        attempts: runs started.
        redeliveries: leases that expired while it ran (a lost worker).
        deferrals: times the handler deferred it.
        payload: the job's fields (decoded JSON).
        headers: the envelope's headers (decoded JSON).
        published_by: who published a topic message ("" when unknown).
        error: the last error in full (``None`` when none).
        errors: every failed attempt's error, oldest first (``JobInfo.errors``).
        created_at, available_at, processed_at: aware datetimes (``processed_at`` may be
            ``None``).
    """

    id: str
    kind: Kind
    queue: str
    job_type: str
    status: str
    priority: int
    attempts: int
    redeliveries: int
    deferrals: int
    payload: Any
    headers: dict[str, Any]
    published_by: str
    error: str | None
    created_at: datetime
    available_at: datetime
    processed_at: datetime | None
    errors: tuple[AttemptError, ...] = ()


@dataclass(frozen=True)
class Touched:
    """How many failed rows of one queue a retry or discard acted on."""

    kind: Kind
    queue: str
    count: int


@dataclass(frozen=True, slots=True)
class Held:
    """A failed (or cancelled) row a retry leaves alone: ``holder`` (in ``holder_status``)
    holds its unique key, and retrying it would run the key twice; or, when ``never_built``,
    the row is a workflow step that never ran (its input was never built: an upstream step
    failed, ``holder`` being that step's id, or ``""`` when it was cancelled while waiting)."""

    id: str
    holder: str
    holder_status: str
    never_built: bool = False


_CLAIM_COLUMNS = (
    "id",
    "job_type",
    "attempts",
    "deferrals",
    "priority",
    "payload",
    "headers",
    "published_by",
    "enqueued_at_ms",
    "position",
    "redeliveries",
    "waited",
    "due_in",
)
_HELD_COLUMNS = ("held_concurrency", "held_rate", "overridden")


def _columns(cursor: psycopg.AsyncCursor[Any], wanted: Sequence[str]) -> list[int] | None:
    """Where each of ``wanted`` is in the cursor's result; ``None`` when it has no result.

    Raises:
        psycopg.ProgrammingError: a wanted column is missing (the statement and the code
            disagree).
    """
    if cursor.description is None:
        return None
    index = {column.name: i for i, column in enumerate(cursor.description)}
    missing = [name for name in wanted if name not in index]
    if missing:
        raise psycopg.ProgrammingError(f"the result lacks the column(s) {', '.join(missing)}")
    return [index[name] for name in wanted]


def json_value(text: str) -> Any:
    """The value of JSON ``text`` as PostgreSQL writes a ``jsonb`` out: parsed by
    pydantic-core's parser (a tenth of the standard library's cost, which counts once per
    claimed job), by ``json.loads`` for what that parser refuses (a lone surrogate escape, which
    ``jsonb`` never holds). The same values either way: ``jsonb`` holds no NaN."""
    try:
        return from_json(text)
    except ValueError:
        return json.loads(text)


FlowHeld = tuple[int | None, int | None, bool]
"""What a claim's flow limits did: the due rows its concurrency caps and its rate limits held
back (``None`` from the plain claim), and whether an operator set the queue's limits at run
time (``overridden``: the plain claim then took nothing, and the claim runs again limited)."""
ClaimRow = tuple[Claim | None, float | None, FlowHeld]
"""One row of the ``claim`` statement: the row claimed (``None`` on the one row of a claim that
took nothing), ``due_in``, the seconds until the queue's next row falls due as the statement
reports it (``None`` on a full claim or when nothing is scheduled), and ``FlowHeld``."""


def claim_rows(config: QueueConfig) -> AsyncRowFactory[ClaimRow]:
    """The row factory of the ``claim`` and ``claim_limited`` statements for ``config``'s
    queue: each row becomes a ``Claim`` whose envelope names the queue and its kind, with the
    statement's ``due_in`` and ``FlowHeld``."""
    queue, kind = config.name, config.kind
    trusted = Envelope.trusted
    loads = json_value

    def factory(cursor: psycopg.AsyncCursor[Any]) -> RowMaker[ClaimRow]:
        at = _columns(cursor, _CLAIM_COLUMNS)
        if at is None:
            return no_result
        i_id, i_type, i_attempts, i_deferrals, i_priority, i_payload = at[:6]
        i_headers, i_by, i_ms, i_position, i_redeliveries, i_waited, i_due = at[6:]
        i_held, i_rate, i_set = _columns(cursor, _HELD_COLUMNS) or (0, 0, 0)

        def make(values: Sequence[Any]) -> ClaimRow:
            row_id = values[i_id]
            held = (values[i_held], values[i_rate], bool(values[i_set]))
            if row_id is None:  # the claim took nothing: only due_in is told
                return None, values[i_due], held
            raw = values[i_headers]  # json text, NULL when empty
            headers = loads(raw) if raw else {}
            if published_by := values[i_by]:
                headers[PUBLISHED_BY] = published_by
            attempts = values[i_attempts]
            # every value comes typed from the table's columns: no validation per job
            envelope = trusted(
                row_id,
                values[i_type],
                queue,
                attempts if attempts > 1 else 1,
                values[i_ms],
                values[i_deferrals],
                values[i_priority],
                loads(values[i_payload]),
                headers,
                kind,
                values[i_redeliveries],
            )
            return Claim(envelope, values[i_position], values[i_waited]), values[i_due], held

        return make

    return factory


def attempt_errors(stored: Any) -> tuple[AttemptError, ...]:
    """The ``errors`` column (a JSON array, decoded) as ``AttemptError`` records."""
    if not isinstance(stored, list):
        return ()
    return tuple(AttemptError.from_json(item) for item in stored)


def job_info(row: JobInfo) -> JobInfo:
    """A ``job_info`` row finished: its due time in UTC, its progress and errors decoded."""
    stored: Any = row.progress  # the jsonb column, read as a dict
    progress = None if stored is None else Progress(**stored)
    due_at = row.due_at.astimezone(UTC)
    return replace(row, due_at=due_at, progress=progress, errors=attempt_errors(row.errors))


def with_errors(row: RowDetail) -> RowDetail:
    """An ``ops_show`` row with its errors decoded."""
    return replace(row, errors=attempt_errors(row.errors))
