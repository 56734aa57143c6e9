"""Commands of the typed-job face: ``queuey demo``, ``queuey worker``, ``queuey db migrate``."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from queuey.backends.base import Backend
from queuey.cli import (
    AMQP_URL,
    DATABASE_URL,
    SCHEMA,
    load_attr,
    main,
    require,
    run_async,
    run_until_signal,
)


async def _open_backend(
    kind: str, database_url: str | None, amqp_url: str | None, schema: str
) -> Backend:
    if kind == "postgres":
        from queuey.backends.postgres import PostgresBackend

        url = require(database_url, "database url", "QUEUEY_DATABASE_URL")
        return await PostgresBackend.connect(url, schema=schema, migrate=True)
    if kind == "rabbitmq":
        rabbitmq = importlib.import_module("queuey.backends.rabbitmq")
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

    summary = run_async(tour())
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


@main.command("worker")
@click.argument("target")
def worker_command(target: str) -> None:
    """Run TARGET (module:attr, a Worker or a zero-argument factory returning one, which may be
    async) until SIGINT/SIGTERM, then shut it down gracefully."""
    from queuey.worker import Worker

    obj = load_attr(target)

    async def serve() -> None:
        worker = obj
        if not isinstance(worker, Worker) and callable(worker):
            try:
                inspect.signature(obj).bind()
            except (TypeError, ValueError):
                raise click.UsageError(
                    f"{target} must be a Worker or a factory taking no arguments"
                ) from None
            worker = obj()
            if asyncio.iscoroutine(worker):
                worker = await worker
        if not isinstance(worker, Worker):
            raise click.UsageError(f"{target} is not a Worker or a factory returning one")
        await run_until_signal(worker.run, worker.shutdown)

    run_async(serve())


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
    click.echo(f"schema {schema!r}: applied {len(applied)} migration(s) {applied or ''}".strip())
