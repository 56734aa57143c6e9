"""The ``queuey`` command line: thin wrappers that parse arguments and call the library.

Exit codes: 0 done, 1 nothing found, 2 bad usage, 3 the server cannot be reached.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.table import Table

from queuey.backends.base import Backend
from queuey.errors import BackendError, QueueyError

__all__ = ["main"]

log = logging.getLogger("queuey.cli")

EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

DATABASE_URL = click.option(
    "--database-url", envvar="QUEUEY_DATABASE_URL", help="PostgreSQL URL (or QUEUEY_DATABASE_URL)."
)
SCHEMA = click.option("--schema", default="queuey", show_default=True, help="PostgreSQL schema.")


@click.group()
@click.option("-v", "--verbose", count=True, help="More logging (-v INFO, -vv DEBUG).")
def main(verbose: int) -> None:
    """queuey: typed background jobs and topics on PostgreSQL, RabbitMQ or in memory."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _run(coro: Awaitable[Any]) -> Any:
    try:
        return asyncio.run(_as_coroutine(coro))
    except BackendError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_UNREACHABLE)
    except QueueyError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)


async def _as_coroutine(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _require(url: str | None, what: str, env: str) -> str:
    if not url:
        raise click.UsageError(f"{what} is required: pass --{what.replace(' ', '-')} or set {env}")
    return url


async def _open_backend(
    kind: str, database_url: str | None, amqp_url: str | None, schema: str
) -> Backend:
    if kind == "postgres":
        from queuey.backends.postgres import PostgresBackend

        url = _require(database_url, "database url", "QUEUEY_DATABASE_URL")
        return await PostgresBackend.connect(url, schema=schema, migrate=True)
    if kind == "rabbitmq":
        rabbitmq = importlib.import_module("queuey.backends.rabbitmq")
        url = _require(amqp_url, "amqp url", "QUEUEY_AMQP_URL")
        backend: Backend = await rabbitmq.RabbitMqBackend.connect(url)
        return backend
    from queuey.backends.memory import MemoryBackend

    return MemoryBackend()


@main.command()
@click.option(
    "--backend",
    "kind",
    type=click.Choice(["memory", "postgres", "rabbitmq"]),
    default="memory",
    show_default=True,
)
@DATABASE_URL
@click.option("--amqp-url", envvar="QUEUEY_AMQP_URL", help="RabbitMQ URL (or QUEUEY_AMQP_URL).")
@click.option(
    "--schema", default="queuey_demo", show_default=True, help="PostgreSQL schema the demo uses."
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def demo(
    kind: str, database_url: str | None, amqp_url: str | None, schema: str, as_json: bool
) -> None:
    """Run the six-job tour and print per queue acked / dead / pending."""
    from queuey.demo import run_tour

    async def tour() -> Any:
        backend = await _open_backend(kind, database_url, amqp_url, schema)
        try:
            await _reset_demo(backend)
            return await run_tour(backend)
        finally:
            await backend.close()

    summary = _run(tour())
    if as_json:
        click.echo(json.dumps(summary.as_json(), indent=2))
        return
    table = Table(title=f"queuey demo on {kind}")
    for column in ("queue", "acked", "dead", "pending"):
        table.add_column(column)
    for name, counts in summary.queues.items():
        table.add_row(name, *(str(counts[k]) for k in ("acked", "dead", "pending")))
    console = Console()
    console.print(table)
    for dead in summary.dead_letters:
        console.print(
            f"dead letter on {dead['queue']} ({dead['job_type']}, attempt "
            f"{dead['attempt']}): {dead['reason']}"
        )


async def _reset_demo(backend: Backend) -> None:
    purge: Callable[[list[str]], Awaitable[int]] | None = getattr(backend, "purge", None)
    if purge is not None:
        from queuey.demo import TourQueues

        await purge([queue.name for queue in TourQueues.all()])


def _load_attr(path: str) -> Any:
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


@main.command("worker")
@click.argument("target")
def worker_command(target: str) -> None:
    """Run TARGET (module:attr, a Worker or a zero-argument factory returning one, which may be
    async) until SIGINT/SIGTERM, then shut it down gracefully."""
    from queuey.worker import Worker

    obj = _load_attr(target)

    async def serve() -> None:
        worker = obj
        if not isinstance(worker, Worker) and callable(worker):
            worker = worker()
            if asyncio.iscoroutine(worker):
                worker = await worker
        if not isinstance(worker, Worker):
            raise click.UsageError(f"{target} is not a Worker or a factory returning one")
        await run_until_signal(worker.run, worker.shutdown)

    _run(serve())


@main.group()
def db() -> None:
    """Database schema commands."""


@db.command("migrate")
@DATABASE_URL
@SCHEMA
def db_migrate(database_url: str | None, schema: str) -> None:
    """Create or upgrade the schema (safe to run concurrently: takes an advisory lock)."""
    from queuey.backends.postgres import migrate

    url = _require(database_url, "database url", "QUEUEY_DATABASE_URL")
    applied = _run(migrate(url, schema=schema))
    click.echo(f"schema {schema!r}: applied {len(applied)} migration(s) {applied or ''}".strip())


# -- topics (seed 000) -----------------------------------------------------------------------

CONFIG = click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="The app's TOML file ([queues], [functions], [database]).",
)


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def _database_url(flag: str | None, file_url: str | None, config_path: str) -> str:
    from queuey.topics.connection import DATABASE_URL_ENV, resolve_database_url

    url = resolve_database_url(flag, os.environ.get(DATABASE_URL_ENV), file_url)
    if url is None:
        _fail(
            f"no database URL: pass --database-url, set {DATABASE_URL_ENV}, or set "
            f"[database] url in {config_path}"
        )
    return url


def _load_app(config_path: str, app_target: str | None) -> Any:
    from queuey.topics import App

    try:
        app = App.load(config_path)
        if app_target is not None:
            extra = _load_attr(app_target)
            if not isinstance(extra, App):
                raise click.UsageError(f"{app_target} is not a queuey.topics.App")
            app.include(extra)
    except QueueyError as exc:
        _fail(str(exc))
    return app


@main.command("run")
@CONFIG
@click.option("--app", "app_target", help="module:attr of an App whose functions to add.")
@click.option(
    "--database-url", help="PostgreSQL URL (else QUEUEY_DATABASE_URL, else [database] url)."
)
@SCHEMA
def run_command(
    config_path: str, app_target: str | None, database_url: str | None, schema: str
) -> None:
    """Run the app's topic subscribers until SIGINT/SIGTERM, then shut down gracefully."""
    from queuey.backends.postgres import redact
    from queuey.topics.connection import connect_backend

    app = _load_app(config_path, app_target)
    url = _database_url(database_url, app.database_url, config_path)

    async def serve() -> None:
        logging.getLogger("queuey.topics").info("connecting to %s", redact(url))
        backend = await connect_backend(app.config, url, schema=schema)
        try:
            subscriber = app.subscriber(backend)
            await run_until_signal(subscriber.run, subscriber.shutdown)
        finally:
            await backend.close()

    _run(serve())


@main.command("publish")
@CONFIG
@click.option(
    "--database-url", help="PostgreSQL URL (else QUEUEY_DATABASE_URL, else [database] url)."
)
@SCHEMA
@click.option("--published-by", default="", help="Who publishes (recorded with the message).")
@click.argument("topic")
@click.argument("payload", default="{}")
def publish_command(
    config_path: str,
    database_url: str | None,
    schema: str,
    published_by: str,
    topic: str,
    payload: str,
) -> None:
    """Publish PAYLOAD (JSON, default {}) to TOPIC and print the publication as JSON."""
    from queuey.topics import QueuesConfig, TopicPublisher, load_app_config
    from queuey.topics.config import topic_error
    from queuey.topics.connection import connect_backend

    try:
        app_config = load_app_config(config_path)
    except QueueyError as exc:
        _fail(str(exc))
    if not QueuesConfig.valid_topic(topic):
        _fail(topic_error(topic))
    try:
        message = json.loads(payload)
    except json.JSONDecodeError as exc:
        _fail(f"the payload is not valid JSON: {exc}")
    url = _database_url(database_url, app_config.database_url, config_path)

    async def publish() -> Any:
        backend = await connect_backend(app_config.queues, url, schema=schema)
        try:
            publisher = TopicPublisher(app_config.queues, backend)
            return await publisher.publish(topic, message, published_by)
        finally:
            await backend.close()

    click.echo(json.dumps(_run(publish()).as_json()))
