"""The root ``queuey`` command group and what every command shares: exit codes, one-line
errors, start-up lines, a wide console, loading ``module:attr`` targets and running until a
signal (the options they share are in ``_options``). The command modules import from here;
the root group (``_lazy.LazyGroup``) imports a command's module when that command is run.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

import queuey
from queuey._runtime.heap import freeze_heap
from queuey._terminal import printable, printable_json
from queuey.cli._lazy import LazyGroup, level_of, verbose_everywhere
from queuey.errors import BackendError, QueueyError
from queuey.secrets import RedactingFilter, redact, remember

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "EXIT_NOT_FOUND",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "LOG_FORMAT",
    "announce",
    "describe_backend",
    "main",
    "run_until_signal",
    "starting",
    "verbose_everywhere",
    "wide_console",
]

log = logging.getLogger("queuey.cli")

EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

_T = TypeVar("_T")
_PIPE_WIDTH = 1000


def one_line(text: str) -> str:
    """``text`` folded onto one line."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: message`` on one stderr line (password redacted, control characters
    escaped) and exit with ``code``."""
    click.echo(f"error: {printable(one_line(redact(message)))}", err=True)
    sys.exit(code)


def echo_json(document: object, *, indent: int | None = 2) -> None:
    """Print ``document`` as JSON, every character a terminal would obey escaped."""
    import json

    click.echo(printable_json(json.dumps(document, indent=indent, ensure_ascii=False)))


@click.group(cls=LazyGroup)
@click.option("-v", "--verbose", count=True, help="More logging (-v INFO, -vv DEBUG).")
@click.version_option(queuey.__version__, "--version", prog_name="queuey")
def main(verbose: int) -> None:
    """queuey: typed background jobs and topics on PostgreSQL, RabbitMQ or in memory."""
    root = logging.getLogger()
    if not root.handlers:  # as logging.basicConfig, with control characters escaped
        from queuey.observability import TextFormatter

        stream = logging.StreamHandler()
        stream.setFormatter(TextFormatter())
        root.addHandler(stream)
        root.setLevel(level_of(verbose))
    for handler in root.handlers:
        handler.addFilter(RedactingFilter())
    remember(os.environ.get("QUEUEY_DATABASE_URL"))
    remember(os.environ.get("QUEUEY_AMQP_URL"))


def describe_backend(backend: object) -> str:
    """What a start-up line says about a backend: its kind and where it is, never a password."""
    conninfo = getattr(backend, "conninfo", None)
    if isinstance(conninfo, str):  # PostgresBackend
        schema = getattr(getattr(backend, "statements", None), "schema", None)
        where = f"PostgreSQL {redact(conninfo)}"
        return where if schema is None else f"{where}, schema {schema}"
    if type(backend).__name__ == "MemoryBackend":
        return "memory"
    return redact(repr(backend))


LOG_FORMAT = "queuey.log_format"
"""Where ``--log-format`` records its choice, in the root click context's ``meta``."""


def announce(text: str) -> None:
    """Print a line a long-running command always shows (its start-up line) on stderr: as
    text, or as one JSON log object (logger ``queuey.cli``, level INFO) under
    ``--log-format json``, so a JSON log stream holds nothing else; control characters
    escaped either way."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().meta.get(LOG_FORMAT) == "json":
        from queuey.observability import JsonFormatter

        record = logging.LogRecord("queuey.cli", logging.INFO, __file__, 0, text, None, None)
        text = JsonFormatter().format(record)
    else:
        text = printable(text)
    click.echo(redact(text), err=True)


def starting(command: str, what: str, names: Sequence[str], backend: str, concurrency: int) -> None:
    """Announce the start-up line of a long-running command on stderr, e.g. ``queuey worker:
    queues myapp.emails, myapp.images; backend PostgreSQL postgresql://app:***@db/app, schema
    queuey; concurrency 14`` (one JSON object under ``--log-format json``)."""
    announce(
        f"queuey {command}: {what} {', '.join(names) or '(none)'}; backend {backend}; "
        f"concurrency {concurrency}"
    )


def wide_console() -> Console:
    """A console as wide as the terminal; unbounded when piped, so tables never fold."""
    from rich.console import Console

    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(width=_PIPE_WIDTH if piped else None)


def run_async(work: Awaitable[_T]) -> _T:
    """Run ``work`` to its end: exit 3 when the server cannot be reached (or refuses the
    query), 2 on any other queuey error (a missing or old schema), each with one line on
    stderr."""
    import asyncio  # here, not at the top: `queuey --version` and `--help` never need it

    try:
        return asyncio.run(_as_coroutine(work))
    except BackendError as exc:
        fail(str(exc), EXIT_UNREACHABLE)
    except QueueyError as exc:
        fail(str(exc), EXIT_USAGE)


async def _as_coroutine(awaitable: Awaitable[_T]) -> _T:
    return await awaitable


def require(url: str | None, what: str, env: str) -> str:
    if not url:
        raise click.UsageError(f"{what} is required: pass --{what.replace(' ', '-')} or set {env}")
    return url


def load_attr(path: str) -> Any:
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise click.UsageError(f"{path!r} is not of the form module:attribute")
    sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.UsageError(f"cannot import {module_name!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise click.UsageError(f"{module_name!r} has no attribute {attr!r}") from exc
    return target


async def run_until_signal(
    start: Callable[[], Awaitable[None]],
    stop: Callable[..., None],
    ready: Callable[[], None] | None = None,
) -> None:
    """Run ``start()`` until it returns. The first SIGINT or SIGTERM calls ``stop()`` (graceful);
    a second one calls ``stop(force=True)`` (running jobs are handed back). ``ready()`` (the
    start-up line) is called once the signals are handled, before ``start()``. The start-up
    heap is frozen first (``freeze_heap``): a long-running command's collections then skip it."""
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    received: list[int] = []

    def on_signal(sig: int) -> None:
        received.append(sig)
        if len(received) == 1:
            log.warning(
                "received %s: shutting down gracefully (again to force)", signal.Signals(sig).name
            )
            stop()
        else:
            log.warning("received %s again: forcing shutdown", signal.Signals(sig).name)
            stop(force=True)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    freeze_heap()  # everything is imported: collections skip the start-up heap from now on
    try:
        if ready is not None:
            ready()
        await start()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
