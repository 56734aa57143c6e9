"""The dashboard's commands: ``queuey dashboard`` serves it alone, and ``queuey run --http``
runs an app's topic subscribers, the publish endpoint and the dashboard in one process.

``--http`` is added to the ``run`` command defined in ``_topics``: without it ``run`` is
unchanged. A pause made in the dashboard is the queue's limit zero, answered by the claim
itself: these subscribers, and every other process's, stop claiming at their next claim, and a
resume wakes them at once (a notification).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import click

from queuey._extras import extra_message
from queuey.cli._observe import log_format_option
from queuey.cli._root import SCHEMA, fail, main, remember_option, run_async, run_until_signal
from queuey.cli._topics import CONFIG, _load_app, app_database_url, run_command
from queuey.errors import QueueyError

log = logging.getLogger("queuey.cli")

HOST = click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
PORT = click.option(
    "--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="TCP port."
)


@dataclass(frozen=True)
class _Settings:
    """The checked tables of an app file that the HTTP face needs."""

    http: Any
    dashboard: Any
    publish: Any


def _settings(app_config: Any) -> _Settings:
    """``[http]``, ``[dashboard]`` and ``[queues] publish``, checked; exit 2 on an error."""
    try:
        from queuey.dashboard import DashboardConfig
        from queuey.http import AccessPolicy, HttpConfig
    except ImportError as exc:
        fail(extra_message("the dashboard", "dashboard", exc))
    try:
        http = HttpConfig.from_table(app_config.tables.get("http", {}), app_config.path)
        dashboard = DashboardConfig.from_table(app_config.tables.get("dashboard"), app_config.path)
    except QueueyError as exc:
        fail(str(exc))
    if not dashboard.enabled:
        log.warning("[dashboard] view is private: the dashboard answers 404 to everyone")
    return _Settings(http, dashboard, AccessPolicy.parse(app_config.queues.publish_access()))


def _store(url: str, schema: str, queues: Any) -> Any:
    from queuey.backends.postgres import PgDashboardStore

    try:
        return PgDashboardStore(url, schema=schema, topic_channel=queues.channel())
    except QueueyError as exc:
        fail(str(exc))


@main.command("dashboard")
@CONFIG
@HOST
@PORT
@click.option(
    "--database-url",
    callback=remember_option,
    help="PostgreSQL URL (else QUEUEY_DATABASE_URL, else [database] url).",
)
@SCHEMA
@log_format_option
def dashboard_command(
    config_path: str, host: str, port: int, database_url: str | None, schema: str
) -> None:
    """Serve the dashboard at <base>/dashboard/ until SIGINT/SIGTERM.

    [dashboard] view and act say who may see it and who may act (default "private": 404);
    [http] sets the base path and the API keys and bearer tokens accepted.
    """
    from queuey.topics import load_app_config

    try:
        app_config = load_app_config(config_path)
    except QueueyError as exc:
        fail(str(exc))
    settings = _settings(app_config)
    url = app_database_url(database_url, app_config.database_url, config_path)
    # The "Topic app" panel (pause the app as a whole) only for a file that declares one.
    prefix = app_config.queues.prefix if "queues" in app_config.tables else None

    async def serve() -> None:
        from starlette.applications import Starlette

        from queuey.dashboard import dashboard_mount, dashboard_path
        from queuey.http.server import HttpServer, timeouts

        store = _store(url, schema, app_config.queues)
        try:
            await store.open()
            mount = dashboard_mount(settings.dashboard, store, settings.http, app_prefix=prefix)
            server = HttpServer(
                Starlette(routes=[mount]),
                host=host,
                port=port,
                log_level="info",
                **timeouts(settings.http),
            )
            log.info("dashboard at http://%s:%d%s/", host, port, dashboard_path(settings.http))
            await run_until_signal(server.run, server.shutdown)
        finally:
            await store.close()

    run_async(serve())


def _run_http(
    config_path: str, app_target: str | None, database_url: str | None, schema: str, **net: Any
) -> None:
    """``queuey run --http``: subscribers, publish endpoint and dashboard in one process."""
    app = _load_app(config_path, app_target)
    from queuey.topics import load_app_config

    settings = _settings(load_app_config(config_path))
    url = app_database_url(database_url, app.database_url, config_path)

    async def serve() -> None:
        from queuey.cli._topics import connect_backend
        from queuey.dashboard import dashboard_mount
        from queuey.http import publish_app
        from queuey.http.server import HttpServer, timeouts

        backend = await connect_backend(app.config, url, schema=schema)
        store = _store(url, schema, app.config)
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

    run_async(serve())


async def _together(subscriber: Any, server: Any) -> None:
    """Run the subscriber and the server until both end."""
    await asyncio.gather(subscriber, server)


def _add_http_to_run() -> None:
    """Give ``queuey run`` the ``--http``, ``--host`` and ``--port`` options."""
    plain = run_command.callback
    assert plain is not None
    run_command.params.extend(
        [
            click.Option(
                ["--http"],
                is_flag=True,
                help="Also serve the publish endpoint and the dashboard ([http], [dashboard]).",
            ),
            click.Option(["--host"], default="127.0.0.1", show_default=True, help="With --http."),
            click.Option(
                ["--port"],
                default=8000,
                show_default=True,
                type=click.IntRange(1, 65535),
                help="With --http.",
            ),
        ]
    )

    def run(http: bool, host: str, port: int, **options: Any) -> Any:
        if not http:
            return plain(**options)
        if options.pop("processes", 1) > 1:
            raise click.UsageError("--processes cannot go with --http: one process holds a port")
        return _run_http(**options, host=host, port=port)

    run_command.callback = run


_add_http_to_run()
