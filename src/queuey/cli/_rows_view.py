"""How the commands on a database's rows (``queuey status``, ``queuey failed ...``, ``queuey
jobs show``) print their results: a Rich table and plain text for people, and the JSON shapes
scripts rely on.

Strings that come from the database (queue names, errors, payloads) are printed as plain text,
never interpreted as Rich markup, with every control character escaped
(``queuey._terminal.printable``): one-line fields show a newline as ``\n``; the payload and
the last error (indented) keep their lines. Times are shown in UTC.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from queuey._terminal import printable, printable_json
from queuey.backends.postgres import FailedRow, QueueStatus, RowDetail, Touched
from queuey.cli._attempts_view import errors_json, errors_text
from queuey.queues import QueueConfig

__all__ = [
    "confirmations",
    "labelled",
    "detail_json",
    "detail_text",
    "failed_json",
    "failed_lines",
    "format_age",
    "status_json",
    "status_table",
]

_STATUS_COLUMNS = (
    "queue", "kind", "pending", "scheduled", "running", "failed", "waiting", "oldest pending"
)  # fmt: skip


def format_age(seconds: float | None) -> str:
    """``seconds`` as a short age ("42s", "4m 05s", "3h 02m", "2d 04h"); "-" for ``None``."""
    if seconds is None:
        return "-"
    whole = max(0, int(seconds))
    for unit, size, sub_unit, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if whole >= size:
            return f"{whole // size}{unit} {whole % size // sub_size:02d}{sub_unit}"
    if whole >= 60:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole}s"


def _utc(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


def _utc_short(moment: datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def status_json(rows: Sequence[QueueStatus]) -> dict[str, Any]:
    """The ``status --json`` document (shape in the command's help)."""
    return {
        "queues": [
            {
                "kind": row.kind,
                "queue": row.queue,
                "pending": row.pending,
                "scheduled": row.scheduled,
                "running": row.running,
                "failed": row.failed,
                "waiting": row.waiting,
                "oldest_pending_secs": row.oldest_pending_secs,
            }
            for row in rows
        ]
    }


def status_table(rows: Sequence[QueueStatus], title: str) -> Table:
    """One line per queue: the counts and the oldest due row's age."""
    table = Table(title=Text(title))
    for index, column in enumerate(_STATUS_COLUMNS):
        table.add_column(column, justify="left" if index < 2 else "right")
    for row in rows:
        counts = (row.pending, row.scheduled, row.running, row.failed, row.waiting)
        table.add_row(
            Text(printable(row.queue)),
            Text(printable(row.kind)),
            *(str(count) for count in counts),
            format_age(row.oldest_pending_secs),
        )
    return table


def limits_json(
    configs: Sequence[QueueConfig], held: Sequence[tuple[int, int]]
) -> list[dict[str, Any]]:
    """The ``limits`` list of ``status --queues ... --json`` (shape in the command's help)."""
    return [
        {
            "kind": config.kind,
            "queue": config.name,
            "limits": [spec.label for spec in config.limits],
            "held_concurrency": concurrency,
            "held_rate": rate,
        }
        for config, (concurrency, rate) in zip(configs, held, strict=True)
    ]


def limits_table(configs: Sequence[QueueConfig], held: Sequence[tuple[int, int]]) -> Table:
    """One line per limited queue: its limits and the due rows each kind holds back now."""
    table = Table(title=Text("flow limits (due rows held back now)"))
    for index, column in enumerate(("queue", "kind", "limits", "held: concurrency", "held: rate")):
        table.add_column(column, justify="left" if index < 3 else "right")
    for config, (concurrency, rate) in zip(configs, held, strict=True):
        table.add_row(
            Text(printable(config.name)),
            Text(config.kind),
            Text("; ".join(spec.label for spec in config.limits)),
            str(concurrency),
            str(rate),
        )
    return table


def failed_json(rows: Sequence[FailedRow]) -> dict[str, Any]:
    """The ``failed list --json`` document (shape in the command's help)."""
    return {
        "failed": [
            {
                "id": row.id,
                "kind": row.kind,
                "queue": row.queue,
                "job_type": row.job_type,
                "attempts": row.attempts,
                "processed_at": _utc(row.processed_at),
                "error": row.error,
            }
            for row in rows
        ]
    }


def failed_lines(rows: Sequence[FailedRow], status: str = "failed") -> list[str]:
    """Two lines per row, readable at any terminal width: the row (id first, never shortened,
    as the other commands take it) and when it ended in ``status`` (``failed`` or
    ``cancelled``, what the rows are), then its error's first line, indented."""
    lines = []
    for row in rows:
        when = _utc_short(row.processed_at)
        where = printable(f"{row.kind} {row.queue}  {row.job_type}")
        lines.append(f"{row.id}  {where}  attempts {row.attempts}  {status} {when} UTC")
        lines.append(f"    {printable(row.error or '-')}")
    return lines


def detail_json(row: RowDetail) -> dict[str, Any]:
    """The ``failed show --json`` document: every field of ``RowDetail``, times in ISO 8601."""
    return {
        "id": row.id,
        "kind": row.kind,
        "queue": row.queue,
        "job_type": row.job_type,
        "status": row.status,
        "priority": row.priority,
        "attempts": row.attempts,
        "redeliveries": row.redeliveries,
        "deferrals": row.deferrals,
        "payload": row.payload,
        "headers": row.headers,
        "published_by": row.published_by,
        "error": row.error,
        "errors": errors_json(row.errors),
        "created_at": _utc(row.created_at),
        "available_at": _utc(row.available_at),
        "processed_at": _utc(row.processed_at),
    }


def detail_text(row: RowDetail) -> str:
    """Labelled fields, then the payload as indented JSON, then the last error in full."""
    fields = [
        ("id", row.id),
        ("kind", row.kind),
        ("queue", row.queue),
        ("job type", row.job_type),
        ("status", row.status),
        ("attempts", str(row.attempts)),
        ("redeliveries", str(row.redeliveries)),
        ("deferrals", str(row.deferrals)),
        ("priority", str(row.priority)),
        ("created at", _utc_short(row.created_at) + " UTC"),
        ("available at", _utc_short(row.available_at) + " UTC"),
        (f"{row.status} at", _utc_short(row.processed_at) + " UTC"),
    ]
    if row.published_by:
        fields.append(("published by", row.published_by))
    return labelled(fields, row.payload, row.error, errors_text(row.errors))


def labelled(
    fields: Sequence[tuple[str, str]], payload: Any, error: str | None, attempts: list[str]
) -> str:
    """One ``label value`` line per field (each value on one line), then the payload as
    indented JSON, the error in full, indented by two spaces (so none of its lines reads as
    a field), and the ``attempts`` lines (``errors_text``), every control character escaped."""
    lines = [f"{label:<13} {printable(value)}" for label, value in fields]
    shown = printable_json(json.dumps(payload, indent=2, ensure_ascii=False))
    lines += ["", "payload:", shown, "", "last error:"]
    lines += [f"  {line}" for line in printable(error or "-", block=True).split("\n")]
    lines += ["", *attempts]
    return "\n".join(lines)


def _noun(kind: str) -> str:
    return "job(s)" if kind == "job" else "topic message(s)"


def confirmations(verb: str, touched: Sequence[Touched], status: str = "failed") -> list[str]:
    """One line per queue acted on: "retried 3 failed job(s) on myapp.emails" (``status`` is
    what the rows were: ``failed`` or ``cancelled``)."""
    return [f"{verb} {t.count} {status} {_noun(t.kind)} on {printable(t.queue)}" for t in touched]
