"""The observability options of the long-running commands, each a decorator of its own so a
command takes them with one line:

- ``log_format_option``: ``--log-format text|json`` (``json``: one object per line,
  ``queuey.observability.JsonFormatter``); applied as soon as the option is read.
- ``observe_options``: ``--http-port`` / ``--http-host`` (serve ``/live``, ``/ready`` and
  ``/metrics``; metrics are collected only then) and ``--tracing`` (a CONSUMER span per run,
  from the global OpenTelemetry tracer provider, e.g. ``opentelemetry-instrument``'s). Their
  values wait in the click context until the command calls ``observing(engine)``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import click

from queuey._extras import install_hint
from queuey._runtime.engine import Engine
from queuey.cli._processes import INDEX_ENV
from queuey.cli._root import LOG_FORMAT, fail
from queuey.observability import JsonFormatter
from queuey.secrets import RedactingFilter

__all__ = ["log_format_option", "observe_options", "observing"]

F = TypeVar("F", bound=Callable[..., Any])
_KEY = "queuey.observe"


def _log_format(ctx: click.Context, param: click.Parameter, value: str) -> None:
    ctx.find_root().meta[LOG_FORMAT] = value
    if value != "json":
        return
    formatter = JsonFormatter()
    root = logging.getLogger()
    if not root.handlers:
        stream = logging.StreamHandler()
        stream.addFilter(RedactingFilter())
        root.addHandler(stream)
    for handler in root.handlers:
        handler.setFormatter(formatter)
    logging.captureWarnings(True)  # a Python warning is a JSON record too, not a text line


def log_format_option(command: F) -> F:
    """Add ``--log-format text|json`` to ``command``."""
    option = click.option(
        "--log-format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        expose_value=False,
        callback=_log_format,
        help="json: one JSON object per log line (fields, trace and span ids).",
    )
    return option(command)


def _keep(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    ctx.meta.setdefault(_KEY, {})[param.name] = value


def observe_options(command: F) -> F:
    """Add ``--http-port``, ``--http-host`` and ``--tracing`` to ``command``."""
    options = [
        click.option(
            "--http-port",
            type=click.IntRange(0, 65535),
            expose_value=False,
            callback=_keep,
            help="Serve /live, /ready and /metrics on this port (needs the http and metrics "
            "extras); with --processes N, process i serves this port + i - 1.",
        ),
        click.option(
            "--http-host",
            default="0.0.0.0",
            show_default=True,
            expose_value=False,
            callback=_keep,
            help="Address of --http-port.",
        ),
        click.option(
            "--tracing",
            is_flag=True,
            expose_value=False,
            callback=_keep,
            help="An OpenTelemetry span per run, from the global tracer provider (needs the "
            "otel extra).",
        ),
    ]
    for option in options:
        command = option(command)
    return command


@asynccontextmanager
async def observing(engine: Engine) -> AsyncIterator[None]:
    """Instrument ``engine`` and serve its health and metrics, as the options asked, for the
    block (call it inside the command that took ``observe_options``). What the engine was
    already given (its own ``Metrics``, its tracer provider) is kept."""
    chosen = click.get_current_context().meta.get(_KEY, {})
    port, tracing = _own_port(chosen.get("http_port")), bool(chosen.get("tracing"))
    if port is None and not tracing:
        yield
        return
    try:
        metrics = engine.metrics or _metrics() if port is not None else engine.metrics
        engine.instrument(tracing=tracing or engine.tracing, metrics=metrics)
        if port is None:
            yield
            return
        from queuey.http.health import HealthServer
    except ImportError as exc:
        fail(f"--http-port needs the http extra ({install_hint('http,metrics')}): {exc}")
    async with HealthServer(engine, host=chosen.get("http_host", "0.0.0.0"), port=port):
        yield


def _own_port(port: int | None) -> int | None:
    """``port`` for this process: under ``--processes N`` worker process ``i`` (1..N) serves
    ``port + i - 1``, so each is scraped and probed on its own port (0 stays 0: any port)."""
    index = os.environ.get(INDEX_ENV)
    if not port or index is None:
        return port
    return port + int(index) - 1


def _metrics() -> Any:
    from queuey.observability import Metrics

    return Metrics()
