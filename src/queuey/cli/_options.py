"""The options more than one command takes, declared once: each is a decorator (or, where
commands word its help differently, a function returning one) that a command applies with one
line. Options of one concern live with it: ``--log-format``, ``--http-port``/``--http-host``/
``--tracing`` in ``_observe``, ``--processes`` in ``_processes``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from queuey.secrets import remember

__all__ = [
    "AMQP_URL",
    "APP",
    "APP_DATABASE_URL",
    "CONFIG",
    "DATABASE_URL",
    "JSON",
    "SCHEMA",
    "app_server_options",
    "host_option",
    "json_option",
    "port_option",
    "remember_option",
    "url_option",
]

F = TypeVar("F", bound=Callable[..., Any])


def remember_option(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: remember a connection string's password so output never shows it."""
    return remember(value)


def url_option(flag: str, help: str, envvar: str | None = None) -> Callable[[F], F]:
    """A connection URL option (``--database-url``, ``--amqp-url``), read from ``envvar`` too
    when given, whose password no output shows."""
    return click.option(flag, envvar=envvar, callback=remember_option, help=help)


DATABASE_URL = url_option(
    "--database-url", "PostgreSQL URL (or QUEUEY_DATABASE_URL).", "QUEUEY_DATABASE_URL"
)
AMQP_URL = url_option("--amqp-url", "RabbitMQ URL (or QUEUEY_AMQP_URL).", "QUEUEY_AMQP_URL")
SCHEMA = click.option(
    "--schema",
    envvar="QUEUEY_SCHEMA",
    default="queuey",
    show_default=True,
    help="PostgreSQL schema (or QUEUEY_SCHEMA).",
)

# -- the commands that read an app file (run, publish, serve, dashboard) ------------------------

CONFIG = click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="The app's TOML file ([queues], [functions], [database]).",
)
APP = click.option("--app", "app_target", help="module:attr of an App whose functions to add.")
APP_DATABASE_URL = url_option(
    "--database-url", "PostgreSQL URL (else QUEUEY_DATABASE_URL, else [database] url)."
)


def host_option(help: str = "Address to listen on.") -> Callable[[F], F]:
    """``--host`` (default 127.0.0.1) of a command that listens."""
    return click.option("--host", default="127.0.0.1", show_default=True, help=help)


def port_option(help: str = "TCP port.") -> Callable[[F], F]:
    """``--port`` (1..65535, default 8000) of a command that listens."""
    return click.option(
        "--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help=help
    )


def app_server_options(command: F) -> F:
    """The options of a command that serves an app file over HTTP (``serve``, ``dashboard``):
    ``--config``, ``--host``, ``--port``, ``--database-url`` and ``--schema``, in that order."""
    for option in reversed((CONFIG, host_option(), port_option(), APP_DATABASE_URL, SCHEMA)):
        command = option(command)
    return command


def json_option(shape: str = "this help") -> Callable[[F], F]:
    """``--json`` (``as_json``), whose help says where the printed shape is described."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print JSON (shape in {shape}).")


JSON = json_option()
