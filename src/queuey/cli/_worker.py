"""``queuey worker TARGET``: run a ``Worker`` (or what a factory returns) until SIGINT/SIGTERM,
optionally on some of its queues, at another concurrency or in several processes."""

from __future__ import annotations

import inspect
import os
from typing import Any

import click

from queuey.cli._observe import log_format_option, observe_options, observing
from queuey.cli._options import url_option
from queuey.cli._processes import processes_option, supervise
from queuey.cli._root import (
    describe_backend,
    load_attr,
    main,
    run_async,
    run_until_signal,
    starting,
)
from queuey.queues import Queue
from queuey.worker import Worker

__all__ = ["worker_command"]

_BEFORE_IMPORT = "Set {} to this before TARGET is imported, for the app to read."


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
@url_option("--database-url", _BEFORE_IMPORT.format("QUEUEY_DATABASE_URL"), "QUEUEY_DATABASE_URL")
@url_option("--amqp-url", _BEFORE_IMPORT.format("QUEUEY_AMQP_URL"), "QUEUEY_AMQP_URL")
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
