"""The attempt errors of one job as ``queuey jobs show`` and ``queuey failed show`` print them:
text (each attempt's number, time, worker, ``Type: message`` and its traceback, indented,
every control character escaped) or JSON (``AttemptError.to_json``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import Any

from queuey._terminal import printable
from queuey.attempts import MAX_ATTEMPT_ERRORS, AttemptError

__all__ = ["errors_json", "errors_text"]


def errors_json(errors: Sequence[AttemptError]) -> list[dict[str, Any]]:
    """``[{"attempt", "type", "message", "traceback", "at", "worker"}, ...]``, oldest first."""
    return [error.to_json() for error in errors]


def _headline(error: AttemptError) -> str:
    if error.type is None:
        return error.message
    return f"{error.type}: {error.message}" if error.message else error.type


def errors_text(errors: Sequence[AttemptError]) -> list[str]:
    """The lines of the "attempt errors" section (``["attempt errors: -"]`` when none)."""
    if not errors:
        return ["attempt errors: -"]
    lines = [f"attempt errors ({len(errors)}, oldest first; the latest {MAX_ATTEMPT_ERRORS} kept):"]
    for error in errors:
        at = "-" if error.at is None else error.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        worker = printable(error.worker or "-")
        lines.append(f"  attempt {error.attempt} at {at} UTC on {worker}")
        lines += [f"    {printable(line)}" for line in _lines(_headline(error)) or [""]]
        if error.traceback:
            lines += [f"      {printable(line)}" for line in _lines(error.traceback)]
    return lines


def _lines(text: str) -> list[str]:
    """``text`` split at its newlines only (a CR or other separator is shown escaped)."""
    return text.removesuffix("\n").split("\n") if text else []
