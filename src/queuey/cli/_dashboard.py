"""``queuey dashboard``: the dashboard alone, at ``<base>/dashboard/``, for the database of an
app file (``queuey run --http`` serves it beside an app's subscribers)."""

from __future__ import annotations

import logging

from queuey.cli._app import HttpSettings, app_database_url, dashboard_store
from queuey.cli._observe import log_format_option
from queuey.cli._options import app_server_options
from queuey.cli._root import fail, main, run_async, run_until_signal
from queuey.errors import QueueyError

__all__ = ["dashboard_command"]

log = logging.getLogger("queuey.cli")


@main.command("dashboard")
@app_server_options
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
    settings = HttpSettings.of(app_config)
    url = app_database_url(database_url, app_config.database_url, config_path)
    # The "Topic app" panel (pause the app as a whole) only for a file that declares one.
    prefix = app_config.queues.prefix if "queues" in app_config.tables else None

    async def serve() -> None:
        from starlette.applications import Starlette

        from queuey.dashboard import dashboard_mount, dashboard_path
        from queuey.http.server import HttpServer, timeouts

        store = dashboard_store(url, schema, app_config.queues)
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
