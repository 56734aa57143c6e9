"""Commands of the topic face: ``queuey run`` and ``queuey publish``, and
``connect_backend``, where the topic commands (``queuey serve`` too) choose their concrete
backend: the topic face itself only knows the backend contract."""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any

import click

from queuey.cli._observe import log_format_option, observe_options, observing
from queuey.cli._processes import processes_option, supervise
from queuey.cli._root import (
    SCHEMA,
    describe_backend,
    echo_json,
    fail,
    load_attr,
    main,
    remember_option,
    run_async,
    run_until_signal,
    starting,
)
from queuey.errors import QueueyError
from queuey.secrets import redact, remember

if TYPE_CHECKING:
    from queuey.backends.base import Backend
    from queuey.topics.config import QueuesConfig

# -- topics --------------------------------------------------------------------------------

CONFIG = click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="The app's TOML file ([queues], [functions], [database]).",
)


def app_database_url(flag: str | None, file_url: str | None, config_path: str) -> str:
    """The database URL from the flag, else QUEUEY_DATABASE_URL, else the file; exit 2 if none."""
    from queuey.topics.connection import DATABASE_URL_ENV, resolve_database_url

    url = remember(resolve_database_url(flag, os.environ.get(DATABASE_URL_ENV), file_url))
    if url is None:
        fail(
            f"no database URL: pass --database-url, set {DATABASE_URL_ENV}, or set "
            f"[database] url in {config_path}"
        )
    return url


async def connect_backend(
    config: QueuesConfig, url: str, *, schema: str = "queuey", migrate: bool = False
) -> Backend:
    """The ``PostgresBackend`` an app's topics run on: the options ``[queues]`` implies
    (``backend_options``: channel, poll interval, lease, retention, ``max_redeliveries``).

    Args:
        config: the app's ``[queues]`` settings.
        url: the PostgreSQL URL.
        schema: the PostgreSQL schema holding queuey's table.
        migrate: create or upgrade the schema first.

    Raises:
        BackendError: the database cannot be reached.
        SchemaError: the schema is older than this version needs (with ``migrate=False``).
    """
    from queuey.backends.postgres import PostgresBackend
    from queuey.topics.connection import backend_options

    options = backend_options(config)
    backend: Backend = await PostgresBackend.connect(url, schema=schema, migrate=migrate, **options)
    return backend


def _load_app(config_path: str, app_target: str | None) -> Any:
    from queuey.topics import App

    try:
        app = App.load(config_path)
        if app_target is not None:
            extra = load_attr(app_target)
            if not isinstance(extra, App):
                raise click.UsageError(f"{app_target} is not a queuey.topics.App")
            app.include(extra)
    except QueueyError as exc:
        fail(str(exc))
    return app


@main.command("run")
@CONFIG
@click.option("--app", "app_target", help="module:attr of an App whose functions to add.")
@click.option(
    "--database-url",
    callback=remember_option,
    help="PostgreSQL URL (else QUEUEY_DATABASE_URL, else [database] url).",
)
@SCHEMA
@processes_option
@observe_options
@log_format_option
def run_command(
    config_path: str, app_target: str | None, database_url: str | None, schema: str, processes: int
) -> None:
    """Run the app's topic subscribers until SIGINT/SIGTERM, then shut down gracefully."""
    supervise(processes, "run")
    app = _load_app(config_path, app_target)
    url = app_database_url(database_url, app.database_url, config_path)

    async def serve() -> None:
        logging.getLogger("queuey.topics").info("connecting to %s", redact(url))
        backend = await connect_backend(app.config, url, schema=schema)
        try:
            subscriber = app.subscriber(backend)
            topics = [queue.name for queue in subscriber.queues]
            where = describe_backend(backend)

            def ready() -> None:
                starting("run", "topics", topics, where, subscriber.concurrency)

            async with observing(subscriber):
                await run_until_signal(subscriber.run, subscriber.shutdown, ready)
        finally:
            await backend.close()

    run_async(serve())


@main.command("publish")
@CONFIG
@click.option(
    "--database-url",
    callback=remember_option,
    help="PostgreSQL URL (else QUEUEY_DATABASE_URL, else [database] url).",
)
@SCHEMA
@click.option("--published-by", default="", help="Who publishes (recorded with the message).")
@click.option(
    "--priority",
    type=int,
    default=0,
    show_default=True,
    help="Higher is handled first (0..10).",
)
@click.argument("topic")
@click.argument("payload", default="{}")
def publish_command(
    config_path: str,
    database_url: str | None,
    schema: str,
    published_by: str,
    priority: int,
    topic: str,
    payload: str,
) -> None:
    """Publish PAYLOAD (JSON, default {}) to TOPIC and print the publication as JSON."""
    from queuey.topics import QueuesConfig, TopicPublisher, load_app_config
    from queuey.topics.config import topic_error
    from queuey.topics.publisher import TOPIC_MAX_PRIORITY

    try:
        app_config = load_app_config(config_path)
    except QueueyError as exc:
        fail(str(exc))
    if not QueuesConfig.valid_topic(topic):
        fail(topic_error(topic))
    if not 0 <= priority <= TOPIC_MAX_PRIORITY:
        fail(f"--priority: {priority} is out of range 0..{TOPIC_MAX_PRIORITY}")
    try:
        message = json.loads(payload, parse_constant=_refuse_constant)
    except ValueError as exc:  # JSONDecodeError included
        fail(f"the payload is not valid JSON: {exc}")
    url = app_database_url(database_url, app_config.database_url, config_path)

    async def publish() -> Any:
        backend = await connect_backend(app_config.queues, url, schema=schema)
        try:
            publisher = TopicPublisher(app_config.queues, backend)
            return await publisher.publish(topic, message, published_by, priority=priority)
        finally:
            await backend.close()

    try:
        publication = run_async(publish())
    except TypeError as exc:
        fail(str(exc))
    echo_json(publication.as_json(), indent=None)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")
