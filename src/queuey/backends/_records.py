"""The values the backend contract passes around (re-exported by ``backends.base``): what
``cancel`` did, where a job is (``JobState``, ``JobInfo``), how it ended (``JobEnd``), and a
queue's depth (``QueueDepth``). Plain frozen values, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from queuey.attempts import AttemptError
from queuey.envelope import Kind
from queuey.progress import Progress

__all__ = ["CancelResult", "JobEnd", "JobInfo", "JobState", "QueueDepth"]

CancelResult = Literal["cancelled", "requested", "not_found"]
"""What ``cancel`` did: ``"cancelled"`` (the job was pending or scheduled and is now cancelled),
``"requested"`` (it was running: its worker was told, and it ends cancelled when that run
ends, staying running and held until then), ``"not_found"``
(no pending, scheduled or running job has this id: unknown, finished or already cancelled)."""

JobState = Literal["pending", "running", "done", "failed", "cancelled", "waiting"]
"""Where a job is: pending (due now, or scheduled for later: see ``JobInfo.due_at``), being run
by a worker, handled, failed for good (a dead letter, kept for a person), cancelled, or waiting
(a workflow step whose parents have not all ended; it is never claimed until they have)."""


@dataclass(frozen=True)
class JobEnd:
    """How a job ended, as an awaiter of its result reads it.

    Attributes:
        state: ``"done"``, ``"failed"`` or ``"cancelled"``.
        error: the last error or the dead-letter reason (``None`` when none was recorded).
        result: the stored result as JSON text; ``None`` when none was stored (a job that
            declares no result type).
    """

    state: JobState
    error: str | None
    result: str | None


@dataclass(frozen=True)
class JobInfo:
    """One job (or topic message) as its backend knows it now.

    Attributes:
        id: the job id ``enqueue`` returned (a UUID string).
        kind: ``"job"`` or ``"topic"``.
        queue: the queue name (a topic message's topic).
        job_type: the job's name (a topic message's subscriber).
        state: ``"pending"``, ``"running"``, ``"done"``, ``"failed"``, ``"cancelled"`` or
            ``"waiting"`` (a workflow step whose parents have not all ended: never claimed).
        attempts: runs started (0 before the first; a deferral gives its run back).
        redeliveries: runs that ended with a lost worker (PostgreSQL leases).
        deferrals: times a handler deferred it.
        priority: its priority (a deferred job carries its queue's top priority).
        due_at: when it is (pending) or was due to run, an aware UTC datetime; a pending job
            due in the future is scheduled (a delay, a retry's backoff, a deferral).
        last_error: the last failure's text (a retry's error, the dead-letter reason), kept
            after a later success; ``None`` when it never failed.
        payload: the job's fields (decoded JSON).
        result: a done job's stored result (decoded JSON; ``None`` when none was stored).
        progress: the last progress its handler reported (``None`` when none).
        errors: every failed attempt's ``AttemptError``, oldest first (the latest
            ``MAX_ATTEMPT_ERRORS`` of them); empty when no run failed.
        cancel_requested: a cancel reached the job while it runs (``state`` is ``"running"``):
            it ends ``cancelled`` when that run ends.
    """

    id: str
    kind: Kind
    queue: str
    job_type: str
    state: JobState
    attempts: int
    redeliveries: int
    deferrals: int
    priority: int
    due_at: datetime
    last_error: str | None
    payload: Any
    result: Any = None
    progress: Progress | None = None
    errors: tuple[AttemptError, ...] = ()
    cancel_requested: bool = False


@dataclass(frozen=True)
class QueueDepth:
    """The live messages of one queue (queues holding only handled messages are not listed).

    Attributes:
        kind: ``"job"`` or ``"topic"``.
        queue: the queue (or topic) name.
        pending: messages due now, waiting for a worker.
        scheduled: messages not yet due (delayed, or waiting for a retry).
        running: messages a worker holds.
        failed: messages that failed for good and wait for a person.
        oldest_pending_secs: how long the oldest due message has waited since it became due
            (seconds, the backend's clock); ``None`` when nothing is due.
        waiting: workflow steps whose parents have not all ended (never claimed until then).
    """

    kind: Kind
    queue: str
    pending: int
    scheduled: int
    running: int
    failed: int
    oldest_pending_secs: float | None
    waiting: int = 0
