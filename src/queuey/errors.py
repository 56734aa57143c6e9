"""Every exception queuey raises, and the signals a handler raises to choose an outcome.

The tree::

    QueueyError
    ├── ConfigError            a declaration or configuration is invalid (names the attribute/key)
    ├── PayloadError           a job or topic payload is not JSON every backend stores alike
    ├── SchemaError            the database schema is older than this version needs
    ├── BackendError           the transport failed (connection lost, query failed, broker refused)
    │   ├── BackendUnavailableError  the server could not be reached: trying later may succeed
    │   └── UnknownQueueError  an operation named a queue this backend never declared
    ├── ShutDownError          the backend or worker is closed
    ├── NotSupportedError      this backend cannot do that (cancel on RabbitMQ, ...)
    ├── DuplicateHandlerError  two handlers registered for one job type
    ├── ResultError            a handler returned a value its job's result type refuses
    ├── JobFailedError         an awaited job ended failed or cancelled, without a result
    ├── UnknownJobError        an awaited job id is not (or no longer) known to the backend
    └── ResultTimeoutError     a result was not there within the timeout (also a TimeoutError)

    TransactionWarning         a sync enqueue inside Django's transaction.atomic() did not join it

    HandlerSignal              raised by a handler to choose its outcome (not an error of ours)
    ├── Retry                  retryable failure: the retry policy decides
    ├── Fatal                  dead-letter now, whatever the policy
    └── Defer                  not a failure: come back after ``delay``, no attempt spent

Any exception a handler raises that is not a ``HandlerSignal`` is retryable.
"""

from __future__ import annotations

from datetime import timedelta

from queuey._duration_syntax import to_delay

__all__ = [
    "BackendError",
    "BackendUnavailableError",
    "BatchEndedError",
    "ConfigError",
    "Defer",
    "DuplicateHandlerError",
    "Fatal",
    "HandlerSignal",
    "JobFailedError",
    "NotSupportedError",
    "PayloadError",
    "QueueyError",
    "ResultError",
    "ResultTimeoutError",
    "Retry",
    "SchemaError",
    "ShutDownError",
    "TransactionWarning",
    "UnknownBatchError",
    "UnknownJobError",
    "UnknownQueueError",
]


class QueueyError(Exception):
    """Root of every error queuey raises."""


class ConfigError(QueueyError, ValueError):
    """A declaration or configuration value is invalid; the message names the offending one."""


class PayloadError(QueueyError, ValueError):
    """A job or topic payload that is not JSON every backend stores and gives back alike; it
    is refused before anything is written.

    The message names what was being enqueued or published and where in it the value sits::

        job type 'app.SendEmail': SendEmail.items[3].price is NaN, which is not JSON
        topic 'order.paid': payload.name has a lone surrogate ('\\ud800' at 4), which is not JSON

    Attributes:
        subject: ``"job type 'app.SendEmail'"`` or ``"topic 'order.paid'"``.
        path: where the value is: the job class and its field (``SendEmail.items[3].price``),
            or ``payload`` and the way into it (``payload.items[0]``).
        problem: what is wrong with it.
    """

    def __init__(self, subject: str, path: str, problem: str) -> None:
        super().__init__(f"{subject}: {path} {problem}")
        self.subject = subject
        self.path = path
        self.problem = problem

    def __reduce__(self) -> tuple[type[PayloadError], tuple[str, str, str]]:
        return PayloadError, (self.subject, self.path, self.problem)


class SchemaError(QueueyError):
    """The database schema is older than this version of queuey needs: run `queuey db migrate`."""


class BackendError(QueueyError):
    """The transport failed: a lost connection, a failed query, a refused publish."""


class BackendUnavailableError(BackendError):
    """The server could not be reached in time (down, restarting, unreachable) or the
    connection broke: the same call may succeed later. An enqueue that found no connection
    within its backend's ``publish_timeout`` wrote nothing, and its message says for how long
    it was tried; one whose statement the database did not answer within it (PostgreSQL) may
    or may not have been written, and says so (a retry is at-least-once). The HTTP publish
    endpoint answers it with 503 and ``Retry-After``."""


class UnknownQueueError(BackendError):
    """An operation named a queue this backend never declared."""

    def __init__(self, queue: str) -> None:
        super().__init__(f"unknown queue `{queue}`")
        self.queue = queue


class ShutDownError(QueueyError):
    """The backend or worker is shut down."""


class NotSupportedError(QueueyError):
    """This backend cannot do what was asked (e.g. cancel a queued message on RabbitMQ, or
    open a handler transaction off PostgreSQL); the message says what and why."""


class ResultError(QueueyError):
    """A handler returned a value that does not validate as its job's result type, or whose
    stored JSON would not read back as it (the message names the job type, the type and the
    field); the attempt fails (retryable). Also raised to a caller whose job's stored result
    does not read as the type asked for.

    Attributes:
        job_id: the job's id when a caller's read failed, else ``None``.
    """

    def __init__(self, message: str, job_id: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id

    def __reduce__(self) -> tuple[type[ResultError], tuple[str, str | None]]:
        return (ResultError, (str(self), self.job_id))


class JobFailedError(QueueyError):
    """An awaited job ended without a result: failed for good (dead-lettered) or cancelled.

    Attributes:
        job_id: the job's id.
        state: ``"failed"`` or ``"cancelled"``.
        last_error: its last error (the dead-letter reason), or ``None``.
    """

    def __init__(self, job_id: str, state: str, last_error: str | None) -> None:
        super().__init__(f"job {job_id} ended {state}: {last_error or 'no error recorded'}")
        self.job_id = job_id
        self.state = state
        self.last_error = last_error

    def __reduce__(self) -> tuple[type[JobFailedError], tuple[str, str, str | None]]:
        return (JobFailedError, (self.job_id, self.state, self.last_error))


class UnknownBatchError(QueueyError, LookupError):
    """The backend has no batch with this id (``BatchHandle.progress``)."""

    def __init__(self, batch_id: str) -> None:
        super().__init__(f"no batch {batch_id} on this backend")
        self.batch_id = batch_id

    def __reduce__(self) -> tuple[type[UnknownBatchError], tuple[str]]:
        return (UnknownBatchError, (self.batch_id,))


class BatchEndedError(QueueyError):
    """Members were added to a batch whose members had all ended (its callbacks were
    released), or to no batch at all; nothing was added."""

    def __init__(self, batch_id: str) -> None:
        super().__init__(
            f"batch {batch_id} has ended (every member ended and its callbacks were released) "
            "or does not exist; nothing was added: add members from a member's handler, or "
            "while some member has not ended, or enqueue a new batch"
        )
        self.batch_id = batch_id

    def __reduce__(self) -> tuple[type[BatchEndedError], tuple[str]]:
        return (BatchEndedError, (self.batch_id,))


class UnknownJobError(QueueyError, LookupError):
    """The backend has no job with this id: never enqueued there, or done and deleted after
    its retention."""

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"no job {job_id}: never enqueued on this backend, or done and deleted after its "
            "retention"
        )
        self.job_id = job_id

    def __reduce__(self) -> tuple[type[UnknownJobError], tuple[str]]:
        return (UnknownJobError, (self.job_id,))


class ResultTimeoutError(QueueyError, TimeoutError):
    """The awaited job had not ended within the timeout; it was left alone (it may still
    end, and its result can be awaited again).

    Attributes:
        job_id: the job's id.
        timeout: the timeout, in seconds.
    """

    def __init__(self, job_id: str, timeout: float) -> None:
        super().__init__(f"job {job_id} had not ended after {timeout:g}s; it was left alone")
        self.job_id = job_id
        self.timeout = timeout

    def __reduce__(self) -> tuple[type[ResultTimeoutError], tuple[str, float]]:
        return (ResultTimeoutError, (self.job_id, self.timeout))


class DuplicateHandlerError(QueueyError):
    """Two handlers were registered for one job type."""

    def __init__(self, job_type: str) -> None:
        super().__init__(f"handler for job type `{job_type}` registered twice")
        self.job_type = job_type


class HandlerSignal(Exception):
    """Base of the outcomes a handler raises on purpose."""


class Retry(HandlerSignal):
    """A retryable failure: the effective retry policy retries it or dead-letters it."""

    def __str__(self) -> str:
        return super().__str__() or "retry requested"


class Fatal(HandlerSignal):
    """A failure that no retry can fix: the job is dead-lettered at once."""

    def __str__(self) -> str:
        return super().__str__() or "fatal"


class Defer(HandlerSignal):
    """Not a failure: hold the job for ``delay`` and redeliver it at the queue's top priority.

    The attempt count is unchanged and ``deferrals`` goes up by one.

    Args:
        delay: how long to hold the job; a duration string ("30s"), a ``timedelta`` or seconds.
        reason: free text for the log, "deferred" by default.

    Raises:
        ConfigError: if ``delay`` does not parse, is negative, or is longer than
            ``queuey.durations.MAX_DURATION`` (3650 days).
    """

    def __init__(self, delay: str | float | timedelta, reason: str = "deferred") -> None:
        try:
            self.delay: timedelta = to_delay(delay)
        except ValueError as exc:
            raise ConfigError(f"Defer delay: {exc}") from None
        self.reason = reason
        super().__init__(f"job deferred for {self.delay.total_seconds():g}s: {reason}")


class TransactionWarning(UserWarning):
    """A synchronous enqueue ran inside an open ``transaction.atomic()`` block of Django's
    default database without joining it: the job is written at once and runs even if the block
    rolls back. Join it with ``connection=django.db.connection`` (or the backend's
    ``default_connection``); enqueue in ``transaction.on_commit`` on a backend that cannot."""
