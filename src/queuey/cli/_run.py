"""``queuey run``: an app's topic subscribers until SIGINT/SIGTERM; with ``--http``, the
publish endpoint and the dashboard too, in the same process.

A pause made in the dashboard is the queue's limit zero, answered by the claim itself: these
subscribers, and every other process's, stop claiming at their next claim, and a resume wakes
them at once (a notification).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import click

from queuey.cli._app import (
    HttpSettings,
    app_database_url,
    connect_backend,
    dashboard_store,
    load_app,
)
from queuey.cli._observe import log_format_option, observe_options, observing
from queuey.cli._options import (
    APP,
    APP_DATABASE_URL,
    CONFIG,
    SCHEMA,
    host_option,
    port_option,
)
from queuey.cli._processes import processes_option, supervise
from queuey.cli._root import describe_backend, main, run_async, run_until_signal, starting
from queuey.secrets import redact

if TYPE_CHECKING:
    from queuey.topics import App

__all__ = ["run_command"]


@main.command("run")
@CONFIG
@APP
@APP_DATABASE_URL
@SCHEMA
@processes_option
@observe_options
@log_format_option
@click.option(
    "--http",
    is_flag=True,
    help="Also serve the publish endpoint and the dashboard ([http], [dashboard]).",
)
@host_option("With --http.")
@port_option("With --http.")
def run_command(
    config_path: str,
    app_target: str | None,
    database_url: str | None,
    schema: str,
    processes: int,
    http: bool,
    host: str,
    port: int,
) -> None:
    """Run the app's topic subscribers until SIGINT/SIGTERM, then shut down gracefully."""
    if http and processes > 1:
        raise click.UsageError("--processes cannot go with --http: one process holds a port")
    supervise(processes, "run")
    app = load_app(config_path, app_target)
    settings = _http_settings(config_path) if http else None
    url = app_database_url(database_url, app.database_url, config_path)
    if settings is None:
        run_async(_serve(app, url, schema))
    else:
        run_async(_serve_http(app, settings, url, schema, host=host, port=port))


def _http_settings(config_path: str) -> HttpSettings:
    """``--http``: the app file's ``[http]``, ``[dashboard]`` and ``[queues] publish``."""
    from queuey.topics import load_app_config

    return HttpSettings.of(load_app_config(config_path))


async def _serve(app: App, url: str, schema: str) -> None:
    """The subscribers alone, until a signal."""
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


async def _serve_http(app: App, settings: HttpSettings, url: str, schema: str, **net: Any) -> None:
    """``--http``: the subscribers, the publish endpoint and the dashboard, until a signal."""
    from queuey.dashboard import dashboard_mount
    from queuey.http import publish_app
    from queuey.http.server import HttpServer, timeouts

    backend = await connect_backend(app.config, url, schema=schema)
    store = dashboard_store(url, schema, app.config)
    try:
        await store.open()
        subscriber = app.subscriber(backend)
        mount = dashboard_mount(
            settings.dashboard, store, settings.http, app_prefix=app.config.prefix
        )
        http_app = publish_app(
            settings.http, app.publisher(backend), settings.publish, mounts=[mount]
        )
        server = HttpServer(http_app, log_level="info", **net, **timeouts(settings.http))

        def stop(force: bool = False) -> None:
            subscriber.shutdown(force=force)
            server.shutdown(force)

        await run_until_signal(lambda: _together(subscriber.run(), server.run()), stop)
    finally:
        await store.close()
        await backend.close()


async def _together(subscriber: Any, server: Any) -> None:
    """Run the subscriber and the server until both end."""
    await asyncio.gather(subscriber, server)
