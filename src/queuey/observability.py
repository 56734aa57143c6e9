"""Observability, one import away: ``Metrics`` (Prometheus series; the ``metrics`` extra),
``HealthServer`` (``/live``, ``/ready``, ``/metrics``; the ``http`` extra), ``JsonFormatter``
(one JSON object per log line; no extra) and ``TextFormatter`` (the CLI's text log lines).

Both formatters write every control character of a record's text (ESC starting a CSI or OSC
sequence, CR, the C1 controls, bidirectional overrides) as a visible escape, so a job's error
or a queue name cannot recolour, retitle or rewrite the terminal or the log viewer showing it,
nor, with its newlines escaped, forge log lines of its own.

Tracing needs no import from here: pass ``tracing=True`` (or a ``TracerProvider``) to
``Producer``, ``Worker``, ``TopicPublisher``, or call ``instrument`` on a worker or subscriber
(the ``otel`` extra). See ``docs/observability.md``.

``Metrics`` and ``HealthServer`` are loaded when first named, so importing this module pulls
in neither prometheus-client nor Starlette.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from queuey._terminal import printable, printable_json
from queuey.secrets import redact

if TYPE_CHECKING:
    from queuey._runtime.metrics import Metrics
    from queuey.http.health import HealthServer

__all__ = ["TEXT_FORMAT", "HealthServer", "JsonFormatter", "Metrics", "TextFormatter"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The CLI's text log line: ``2026-01-02 10:00:00,123 WARNING queuey.worker: ...``."""

_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "taskName"}
)


class JsonFormatter(logging.Formatter):
    """Formats each record as one JSON object on one line: ``time`` (ISO 8601, UTC),
    ``level``, ``logger``, ``message``, every structured field the record carries (``extra``:
    ``job_id``, ``job_type``, ``queue``, ``attempt``, ``topic``...), ``exception`` (the
    traceback) when there is one, and ``trace_id`` / ``span_id`` (hex) when an OpenTelemetry
    span is active. Text is redacted (``queuey.secrets.redact``): no password of a connection
    string queuey was given, nor anything shaped like one, is written.

    ``queuey worker --log-format json`` (and every long-running command) installs it.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = redact(value) if isinstance(value, str) else value
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info))
        entry.update(_trace_ids())
        return printable_json(json.dumps(entry, default=_text, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    """Formats each record as ``TEXT_FORMAT`` (or ``fmt``) on one line, every control
    character of it escaped (``\x1b``, ``\n``...; ``queuey._terminal.printable``); a
    traceback follows on its own lines, its control characters escaped too.

    Args:
        fmt: a ``logging`` format string (default ``TEXT_FORMAT``).
    """

    def __init__(self, fmt: str | None = None) -> None:
        super().__init__(fmt or TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        """The record's line (and its traceback, if any)."""
        cached, record.exc_text = record.exc_text, None  # escaped here, whoever cached it
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatMessage(self, record: logging.LogRecord) -> str:
        """The record's line, escaped onto one line."""
        return printable(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        """The traceback, its lines kept and its control characters escaped."""
        return printable(super().formatException(ei), block=True)

    def formatStack(self, stack_info: str) -> str:
        """The stack, its lines kept and its control characters escaped."""
        return printable(super().formatStack(stack_info), block=True)


def _text(value: object) -> str:
    return redact(str(value))


def _trace_ids() -> dict[str, str]:
    """The active span's ids; nothing when OpenTelemetry was never imported (tracing off)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return {}
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def __getattr__(name: str) -> Any:
    if name == "Metrics":
        from queuey._runtime.metrics import Metrics

        return Metrics
    if name == "HealthServer":
        from queuey.http.health import HealthServer

        return HealthServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
