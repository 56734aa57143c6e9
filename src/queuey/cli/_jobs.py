"""Commands of the typed-job face: ``queuey demo``, ``queuey worker``, ``queuey db migrate``."""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Awaitable, Callable
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from queuey._terminal import printable
from queuey.backends.base import Backend
from queuey.cli._observe import log_format_option, observe_options, observing
from queuey.cli._options import AMQP_URL, DATABASE_URL, SCHEMA, remember_option
from queuey.cli._processes import processes_option, supervise
from queuey.cli._root import (
    describe_backend,
    echo_json,
    fail,
    load_attr,
    main,
    require,
    run_async,
    run_until_signal,
    starting,
    wide_console,
)
from queuey.demo import DEFAULT_PREFIX, Tour, declare_tour, run_tour
from queuey.errors import QueueyError
from queuey.queues import Queue
from queuey.worker import Worker


async def _open_backend(
    kind: str, database_url: str | None, amqp_url: str | None, schema: str
) -> Backend:
    if kind == "postgres":
        from queuey.backends.postgres import PostgresBackend

        url = require(database_url, "database url", "QUEUEY_DATABASE_URL")
        return await PostgresBackend.connect(url, schema=schema, migrate=True)
    if kind == "rabbitmq":
        try:
            rabbitmq = importlib.import_module("queuey.backends.rabbitmq")
        except ImportError as exc:
            fail(str(exc))
        url = require(amqp_url, "amqp url", "QUEUEY_AMQP_URL")
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
@AMQP_URL
@click.option(
    "--schema", default="queuey_demo", show_default=True, help="PostgreSQL schema the demo uses."
)
@click.option(
    "--prefix",
    default=DEFAULT_PREFIX,
    show_default=True,
    help="Prefix of the demo's queue names (<prefix>.emails ...), so demos sharing a broker or "
    "a database do not meet. Each run empties its own queues first.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def demo(
    kind: str,
    database_url: str | None,
    amqp_url: str | None,
    schema: str,
    prefix: str,
    as_json: bool,
) -> None:
    """Run the six-job tour and print per queue acked / dead / pending."""
    try:
        tour = declare_tour(prefix)
    except QueueyError as exc:
        fail(f"--prefix: {exc}")

    async def run() -> Any:
        backend = await _open_backend(kind, database_url, amqp_url, schema)
        try:
            await _reset_demo(backend, tour)
            return await run_tour(backend, prefix=prefix)
        finally:
            await backend.close()

    summary = run_async(run())
    if as_json:
        echo_json(summary.as_json())
        return
    table = Table(title=f"queuey demo on {kind}")
    for column in ("queue", "acked", "dead", "pending"):
        table.add_column(column)
    for name, counts in summary.queues.items():
        table.add_row(
            Text(printable(name)), *(str(counts[k]) for k in ("acked", "dead", "pending"))
        )
    console = wide_console()
    console.print(table)
    for dead in summary.dead_letters:
        line = (
            f"dead letter on {dead['queue']} ({dead['job_type']}, attempt "
            f"{dead['attempt']}): {dead['reason']}"
        )
        console.print(Text(printable(line)))
    console.print(f"done: {summary.settled} settled")


async def _reset_demo(backend: Backend, tour: Tour) -> None:
    purge: Callable[[list[str]], Awaitable[int]] | None = getattr(backend, "purge", None)
    if purge is not None:
        await purge([queue.name for queue in tour.queues.all()])


@main.command("worker")
@click.argument("target")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="Jobs run at once (default: the worker's own; with --queues, the sum of those queues' "
    "prefetch).",
)
@click.option(
    "--queues",
    "queue_names",
    help="Consume only these queues: comma-separated names (myapp.emails) or attributes of the "
    "worker's QueueSet (emails).",
)
@click.option(
    "--database-url",
    envvar="QUEUEY_DATABASE_URL",
    callback=remember_option,
    help="Set QUEUEY_DATABASE_URL to this before TARGET is imported, for the app to read.",
)
@click.option(
    "--amqp-url",
    envvar="QUEUEY_AMQP_URL",
    callback=remember_option,
    help="Set QUEUEY_AMQP_URL to this before TARGET is imported, for the app to read.",
)
@processes_option
@observe_options
@log_format_option
def worker_command(
    target: str,
    concurrency: int | None,
    queue_names: str | None,
    database_url: str | None,
    amqp_url: str | None,
    processes: int,
) -> None:
    """Run TARGET until SIGINT/SIGTERM, then shut it down gracefully.

    TARGET is module:attribute naming a Worker (worker = Worker(AppQueues,
    PostgresBackend(url))) or a factory taking no arguments that returns one (def or async
    def). A backend that is not open yet is opened first; the backend is closed at exit.
    """
    supervise(processes, "worker")
    for name, url in (("QUEUEY_DATABASE_URL", database_url), ("QUEUEY_AMQP_URL", amqp_url)):
        if url:
            os.environ[name] = url
    obj = load_attr(target)

    async def serve() -> None:
        worker = await _resolve_worker(target, obj)
        try:
            worker = _configured(worker, queue_names, concurrency)
            await _open(worker.backend)
            queues = [queue.name for queue in worker.queues]
            where = describe_backend(worker.backend)

            def ready() -> None:
                starting("worker", "queues", queues, where, worker.concurrency)

            async with observing(worker):
                await run_until_signal(worker.run, worker.shutdown, ready)
        finally:
            await worker.backend.close()

    run_async(serve())


_FACTORY_HINT = (
    "point TARGET at a Worker (worker = Worker(AppQueues, backend)) or at a factory taking no "
    "arguments that returns one (async def build() -> Worker: ...)"
)


async def _resolve_worker(target: str, obj: object) -> Worker[Any]:
    """``obj`` if it is a Worker, else what calling (and awaiting) the factory ``obj`` gives."""
    if isinstance(obj, Worker):
        return obj
    if not callable(obj):
        raise click.UsageError(
            f"{target} is of type {type(obj).__name__}, not a Worker: {_FACTORY_HINT}"
        )
    try:
        inspect.signature(obj).bind()
    except (TypeError, ValueError):
        raise click.UsageError(f"{target} takes arguments: {_FACTORY_HINT}") from None
    made = obj()
    if inspect.isawaitable(made):
        made = await made
    if not isinstance(made, Worker):
        raise click.UsageError(
            f"{target} returned an object of type {type(made).__name__}, not a Worker: "
            f"{_FACTORY_HINT}"
        )
    return made


def _configured(
    worker: Worker[Any], queue_names: str | None, concurrency: int | None
) -> Worker[Any]:
    """``worker`` itself, or (with ``--queues`` or ``--concurrency``) a copy with its handlers
    and options that consumes those queues (by default the worker's) with that concurrency (by
    default the sum of the queues' prefetch, as ``Worker`` does)."""
    if queue_names is None and concurrency is None:
        return worker
    queues = worker.queues if queue_names is None else _select(worker, queue_names)
    return worker.replace(queues=queues, concurrency=concurrency)


def _select(worker: Worker[Any], queue_names: str) -> list[Queue]:
    """The queues ``--queues`` names: each a full name or an attribute of the worker's set."""
    queue_set = worker.queue_set
    chosen: list[Queue] = []
    for name in (part.strip() for part in queue_names.split(",")):
        if not name:
            continue
        attribute = getattr(queue_set, name, None) if name.isidentifier() else None
        try:
            queue = attribute if isinstance(attribute, Queue) else queue_set.by_name(name)
        except KeyError:
            known = ", ".join(q.name for q in queue_set.all())
            raise click.UsageError(
                f"--queues: {name!r} is not a queue of {queue_set.__name__} (it has {known})"
            ) from None
        if queue not in chosen:
            chosen.append(queue)
    if not chosen:
        raise click.UsageError("--queues: name at least one queue")
    return chosen


async def _open(backend: object) -> None:
    """Open ``backend`` if it has an ``open`` (PostgreSQL, RabbitMQ; a no-op when it is open)."""
    open_backend = getattr(backend, "open", None)
    if callable(open_backend):
        await open_backend()


@main.group()
def db() -> None:
    """Database schema commands."""


@db.command("migrate")
@DATABASE_URL
@SCHEMA
def db_migrate(database_url: str | None, schema: str) -> None:
    """Create or upgrade the schema (safe to run concurrently: takes an advisory lock)."""
    from queuey.backends.postgres import migrate

    url = require(database_url, "database url", "QUEUEY_DATABASE_URL")
    applied = run_async(migrate(url, schema=schema))
    click.echo(_migrated(schema, applied))


def _migrated(schema: str, applied: list[str]) -> str:
    """What ``db migrate`` did, in the version numbers a schema error names (numbers have gaps,
    so the count of applied migrations is not the version)."""
    from queuey.backends.postgres import LATEST_VERSION

    if not applied:
        return f"schema {schema!r}: already at version {LATEST_VERSION} (nothing to apply)"
    return (
        f"schema {schema!r}: now at version {LATEST_VERSION} "
        f"(applied {len(applied)} migration(s): {', '.join(applied)})"
    )
