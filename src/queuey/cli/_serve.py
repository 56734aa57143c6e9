"""``queuey serve``: the publish endpoint (``queuey.http``) of an app file, with uvicorn."""

from __future__ import annotations

import logging

from queuey._extras import extra_message
from queuey.backends.base import JobLookup
from queuey.cli._app import app_database_url, connect_backend
from queuey.cli._observe import log_format_option
from queuey.cli._options import app_server_options
from queuey.cli._root import fail, main, run_async, run_until_signal
from queuey.errors import QueueyError

__all__ = ["serve_command"]

log = logging.getLogger("queuey.cli")


@main.command("serve")
@app_server_options
@log_format_option
def serve_command(
    config_path: str, host: str, port: int, database_url: str | None, schema: str
) -> None:
    """Serve POST <base>/queues/{topic} until SIGINT/SIGTERM.

    [http] in the app file sets the base path, the body limit and the accepted credentials;
    [queues] publish says who may publish (default "private": every request gets 404);
    [queues] jobs who may read a job's state, progress and result with GET <base>/jobs/{id}
    (default "private": no such route).
    """
    try:
        from queuey.http import AccessPolicy, HttpConfig, publish_app
        from queuey.http.server import HttpServer, timeouts
    except ImportError as exc:
        fail(extra_message("queuey serve", "http", exc))
    from queuey.topics import TopicPublisher, load_app_config

    try:
        app_config = load_app_config(config_path)
        http_config = HttpConfig.from_table(app_config.tables.get("http", {}), app_config.path)
    except QueueyError as exc:
        fail(str(exc))
    access = AccessPolicy.parse(app_config.queues.publish_access())
    url = app_database_url(database_url, app_config.database_url, config_path)

    async def serve() -> None:
        backend = await connect_backend(app_config.queues, url, schema=schema)
        try:
            publisher = TopicPublisher(app_config.queues, backend)
            lookup = backend if isinstance(backend, JobLookup) else None
            jobs_access = AccessPolicy.parse(app_config.queues.jobs_access())
            app = publish_app(http_config, publisher, access, jobs=lookup, jobs_access=jobs_access)
            server = HttpServer(
                app, host=host, port=port, log_level="info", **timeouts(http_config)
            )
            log.info("POST %s/queues/{topic}: publish = %s", http_config.base, access)
            if not jobs_access.is_private:
                log.info("GET %s/jobs/{id}: jobs = %s", http_config.base, jobs_access)
            await run_until_signal(server.run, server.shutdown)
        finally:
            await backend.close()

    run_async(serve())
