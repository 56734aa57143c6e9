"""The ``queuey`` command line: thin wrappers that parse arguments and call the library.

Commands live beside this module: ``_jobs`` (demo, worker, db migrate), ``_topics`` (run,
publish), ``_http`` (serve) and ``_ops`` (status, failed). Exit codes: 0 done, 1 nothing found,
2 bad usage, 3 the server cannot be reached. Messages never show a DSN password.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import click

from queuey.errors import BackendError, QueueyError
from queuey.secrets import RedactingFilter, redact, remember

__all__ = [
    "AMQP_URL",
    "EXIT_NOT_FOUND",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "main",
    "run_until_signal",
]

log = logging.getLogger("queuey.cli")

EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


def remember_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: remember a connection string's password so output never shows it."""
    return remember(value)


DATABASE_URL = click.option(
    "--database-url",
    envvar="QUEUEY_DATABASE_URL",
    callback=remember_option,
    help="PostgreSQL URL (or QUEUEY_DATABASE_URL).",
)
AMQP_URL = click.option(
    "--amqp-url",
    envvar="QUEUEY_AMQP_URL",
    callback=remember_option,
    help="RabbitMQ URL (or QUEUEY_AMQP_URL).",
)
SCHEMA = click.option("--schema", default="queuey", show_default=True, help="PostgreSQL schema.")


def one_line(text: str) -> str:
    """``text`` folded onto one line."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: message`` on one stderr line (password redacted) and exit with ``code``."""
    click.echo(f"error: {one_line(redact(message))}", err=True)
    sys.exit(code)


@click.group()
@click.option("-v", "--verbose", count=True, help="More logging (-v INFO, -vv DEBUG).")
def main(verbose: int) -> None:
    """queuey: typed background jobs and topics on PostgreSQL, RabbitMQ or in memory."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())
    remember(os.environ.get("QUEUEY_DATABASE_URL"))
    remember(os.environ.get("QUEUEY_AMQP_URL"))


def run_async(coro: Awaitable[Any]) -> Any:
    try:
        return asyncio.run(_as_coroutine(coro))
    except BackendError as exc:
        fail(str(exc), EXIT_UNREACHABLE)
    except QueueyError as exc:
        fail(str(exc), EXIT_USAGE)


async def _as_coroutine(awaitable: Awaitable[Any]) -> Any:
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


async def run_until_signal(start: Callable[[], Awaitable[None]], stop: Callable[..., None]) -> None:
    """Run ``start()`` until it returns. The first SIGINT or SIGTERM calls ``stop()`` (graceful);
    a second one calls ``stop(force=True)`` (running jobs are handed back)."""
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
    try:
        await start()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


import queuey.cli._dashboard  # noqa: E402, F401  (queuey dashboard, queuey run --http)
from queuey.cli import _http, _jobs, _ops, _topics  # noqa: E402  (registers the commands)

__all__ += ["_http", "_jobs", "_ops", "_topics"]
