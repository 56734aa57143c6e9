"""The app file of the topic commands (``queuey run``, ``publish``, ``serve``, ``dashboard``):
loading it, its database URL, the backend its topics run on and the tables its HTTP face
reads. ``connect_backend`` is where those commands choose their concrete backend: the topic
face itself only knows the backend contract.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from queuey._extras import extra_message
from queuey.cli._root import fail, load_attr
from queuey.errors import QueueyError
from queuey.secrets import remember

if TYPE_CHECKING:
    from queuey.backends.base import Backend
    from queuey.topics import App
    from queuey.topics.config import QueuesConfig

__all__ = ["HttpSettings", "app_database_url", "connect_backend", "dashboard_store", "load_app"]

log = logging.getLogger("queuey.cli")


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


def load_app(config_path: str, app_target: str | None) -> App:
    """The ``App`` of the file, with the functions of ``--app`` (``module:attr``) added; exit 2
    on an error in either."""
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


@dataclass(frozen=True)
class HttpSettings:
    """The checked tables of an app file that its HTTP face (dashboard, publish endpoint)
    needs: ``[http]`` (an ``HttpConfig``), ``[dashboard]`` (a ``DashboardConfig``) and
    ``[queues] publish`` (an ``AccessPolicy``)."""

    http: Any
    dashboard: Any
    publish: Any

    @classmethod
    def of(cls, app_config: Any) -> HttpSettings:
        """The settings of a loaded app file; exit 2 on an error (or a missing extra)."""
        try:
            from queuey.dashboard import DashboardConfig
            from queuey.http import AccessPolicy, HttpConfig
        except ImportError as exc:
            fail(extra_message("the dashboard", "dashboard", exc))
        try:
            http = HttpConfig.from_table(app_config.tables.get("http", {}), app_config.path)
            dashboard = DashboardConfig.from_table(
                app_config.tables.get("dashboard"), app_config.path
            )
        except QueueyError as exc:
            fail(str(exc))
        if not dashboard.enabled:
            log.warning("[dashboard] view is private: the dashboard answers 404 to everyone")
        return cls(http, dashboard, AccessPolicy.parse(app_config.queues.publish_access()))


def dashboard_store(url: str, schema: str, queues: QueuesConfig) -> Any:
    """The dashboard's ``PgDashboardStore`` (not open yet); exit 2 on a bad schema name."""
    from queuey.backends.postgres import PgDashboardStore

    try:
        return PgDashboardStore(url, schema=schema, topic_channel=queues.channel())
    except QueueyError as exc:
        fail(str(exc))
