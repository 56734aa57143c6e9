"""The error of each failed attempt, kept with its job: ``AttemptError``.

Every run that fails (a retry, or the run that dead-letters the job) adds one record to its
job's history, in the same shape for typed jobs and topic messages: the attempt number, the
exception's type, its message, a bounded traceback, when it was recorded (the backend's clock)
and which worker process ran it. ``queuey jobs show``, ``queuey failed show`` and the
dashboard's job page show them; ``JobInfo.errors`` holds them.

Bounds, so a job that keeps failing cannot grow its row without limit:

- ``MAX_ATTEMPT_ERRORS`` (10) records per job: the latest ones; an older one is dropped when
  a newer one is added;
- a message is cut to ``MAX_MESSAGE_BYTES`` (4,000) UTF-8 bytes, "…" appended;
- a traceback keeps its last ``MAX_TRACEBACK_BYTES`` (8,000) UTF-8 bytes (where the error
  was raised), "…" prepended when cut; the frames of queuey's own machinery that called the
  handler are left out (the log's traceback has every frame).

So one job's history is at most about 120 kB. A run that fails without an exception (a payload
that does not decode, a topic subscriber whose function is not loaded) has no type and no
traceback.
"""

from __future__ import annotations

import os
import traceback as tb
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from queuey._text import MAX_TEXT_BYTES, clean_tail, clean_text

__all__ = [
    "MAX_ATTEMPT_ERRORS",
    "MAX_MESSAGE_BYTES",
    "MAX_TRACEBACK_BYTES",
    "AttemptError",
    "type_name",
]

MAX_ATTEMPT_ERRORS = 10
"""Attempt errors kept per job (the latest)."""

MAX_MESSAGE_BYTES = MAX_TEXT_BYTES
"""An attempt error's message is cut to this many UTF-8 bytes."""

MAX_TRACEBACK_BYTES = 8000
"""An attempt error's traceback keeps its last this many UTF-8 bytes."""


def type_name(error: BaseException) -> str:
    """``error``'s class as ``Name`` for a builtin, else ``module.QualName``."""
    kind = type(error)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _message(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:
        return ""


_PACKAGE = str(Path(__file__).resolve().parent) + os.sep


def _traceback(error: BaseException) -> str:
    """``error``'s traceback, formatted, without queuey's own frames that called the handler
    (the worker's machinery above the first frame of the application's code)."""
    try:
        found = tb.TracebackException.from_exception(error)
        frames = list(found.stack)
        first = next(
            (i for i, frame in enumerate(frames) if not frame.filename.startswith(_PACKAGE)), 0
        )
        found.stack = tb.StackSummary.from_list(frames[first:])
        return "".join(found.format()).rstrip("\n")
    except Exception:
        return f"{type_name(error)} (its traceback could not be formatted)"


@dataclass(frozen=True)
class AttemptError:
    """How one attempt of a job failed.

    Attributes:
        attempt: the run that failed (1-based, as ``JobContext.attempt``).
        type: the exception's class (``KeyError``, ``myapp.mail.SmtpDown``); ``None`` when
            the run failed without one (a payload that does not decode).
        message: the exception's text (else the failure's reason), at most
            ``MAX_MESSAGE_BYTES``.
        traceback: the formatted traceback, its last ``MAX_TRACEBACK_BYTES``; ``None``
            without an exception.
        at: when the failure was recorded, an aware UTC datetime on the backend's clock
            (``None`` until a backend records it).
        worker: the worker process that ran the attempt (PostgreSQL: the claim owner,
            ``host:pid:…``); ``None`` until a backend records it.
    """

    attempt: int
    type: str | None
    message: str
    traceback: str | None = None
    at: datetime | None = None
    worker: str | None = None

    @classmethod
    def of(cls, attempt: int, error: BaseException | None, reason: str) -> AttemptError:
        """The record of attempt ``attempt``: of ``error`` when the run raised one (its
        message, else ``reason``), else of ``reason`` alone."""
        if error is None:
            return cls(attempt, None, clean_text(reason, MAX_MESSAGE_BYTES))
        message = _message(error) or reason
        return cls(
            attempt,
            type_name(error),
            clean_text(message, MAX_MESSAGE_BYTES),
            clean_tail(_traceback(error), MAX_TRACEBACK_BYTES),
        )

    def stamped(self, at: datetime, worker: str) -> AttemptError:
        """This record with when and where it was recorded."""
        return AttemptError(self.attempt, self.type, self.message, self.traceback, at, worker)

    def to_json(self) -> dict[str, Any]:
        """As stored: ``attempt``, ``type``, ``message``, ``traceback`` (and ``at``, ISO 8601,
        and ``worker`` once recorded)."""
        data: dict[str, Any] = {
            "attempt": self.attempt,
            "type": self.type,
            "message": self.message,
            "traceback": self.traceback,
        }
        if self.at is not None:
            data["at"] = self.at.isoformat()
        if self.worker is not None:
            data["worker"] = self.worker
        return data

    @classmethod
    def from_json(cls, data: Any) -> AttemptError:
        """A stored record back; fields it lacks are ``None`` (``0`` for ``attempt``)."""
        if not isinstance(data, dict):
            return cls(0, None, str(data))
        at = data.get("at")
        return cls(
            attempt=int(data.get("attempt") or 0),
            type=data.get("type"),
            message=str(data.get("message") or ""),
            traceback=data.get("traceback"),
            at=datetime.fromisoformat(at) if isinstance(at, str) else None,
            worker=data.get("worker"),
        )
