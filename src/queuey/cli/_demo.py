"""``queuey demo``: the six-job tour (``queuey.demo``) on memory, PostgreSQL or RabbitMQ, and
per queue how many jobs were acked, dead-lettered or left pending."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from queuey._terminal import printable
from queuey.backends.base import Backend
from queuey.cli._options import AMQP_URL, DATABASE_URL
from queuey.cli._root import echo_json, fail, main, require, run_async, wide_console
from queuey.demo import DEFAULT_PREFIX, Tour, declare_tour, run_tour
from queuey.errors import QueueyError

__all__ = ["demo"]


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
