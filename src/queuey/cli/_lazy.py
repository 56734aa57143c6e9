"""The root group's commands, imported when one is run: ``queuey --version`` and ``queuey
--help`` import none of them (nor pydantic, psycopg or rich), so they answer at once.

``COMMANDS`` names, per top-level command, the one module that defines it (named after it:
``run`` in ``_run``, the whole ``jobs`` group in ``_jobs``) and the short help ``--help``
prints; a test checks both against the commands themselves. A module that registers a new
command must be listed here, or the command is never reached:
``tests/unit/test_cli_startup.py`` fails until it is.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import click

__all__ = ["COMMANDS", "LazyGroup", "level_of", "verbose_everywhere"]

_CLI = "queuey.cli."

COMMANDS: dict[str, tuple[str, str]] = {
    "dashboard": (
        "_dashboard",
        "Serve the dashboard at <base>/dashboard/ until SIGINT/SIGTERM.",
    ),
    "db": ("_db", "Database schema commands."),
    "demo": ("_demo", "Run the six-job tour and print per queue acked / dead / pending."),
    "failed": (
        "_failed",
        "Rows that failed for good (or, with --cancelled, cancelled ones): list, show, retry or "
        "discard them (safe while workers run).",
    ),
    "jobs": (
        "_jobs",
        "One job (or topic message) by its id (PostgreSQL): show or cancel it.",
    ),
    "publish": (
        "_publish",
        "Publish PAYLOAD (JSON, default {}) to TOPIC and print the publication as JSON.",
    ),
    "run": (
        "_run",
        "Run the app's topic subscribers until SIGINT/SIGTERM, then shut down gracefully.",
    ),
    "queues": (
        "_queues",
        "Pause, resume and set the flow limits of a queue for every worker (PostgreSQL).",
    ),
    "schedules": ("_schedules", "List, pause and resume periodic schedules (PostgreSQL)."),
    "serve": ("_serve", "Serve POST <base>/queues/{topic} until SIGINT/SIGTERM."),
    "status": (
        "_status",
        "Per queue: rows due now (pending), delayed or waiting for a retry (scheduled), running, "
        "failed, and workflow steps whose parents have not ended (waiting), and how long the "
        "oldest due row has waited (database clock).",
    ),
    "worker": ("_worker", "Run TARGET until SIGINT/SIGTERM, then shut it down gracefully."),
    "workflows": (
        "_workflows",
        "Workflows (PostgreSQL): list them, show one step by step, cancel one.",
    ),
}


def level_of(verbose: int) -> int:
    """The logging level of ``-v`` given ``verbose`` times."""
    return {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)


def _more_verbose(ctx: click.Context, param: click.Parameter, value: int) -> None:
    """``-v`` after a subcommand (``queuey worker app:w -v``) adds to the group's."""
    if value:
        verbose = ctx.find_root().params.get("verbose", 0) + value
        logging.getLogger().setLevel(level_of(verbose))


def verbose_everywhere(group: click.Group) -> None:
    """Give every command under ``group`` its own ``-v/--verbose``."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            verbose_everywhere(command)
        elif not any(param.name == "verbose" for param in command.params):
            command.params.append(
                click.Option(
                    ["-v", "--verbose"],
                    count=True,
                    expose_value=False,
                    callback=_more_verbose,
                    help="More logging (-v INFO, -vv DEBUG), as before the command.",
                )
            )


class LazyGroup(click.Group):
    """A ``click.Group`` whose commands are registered by importing their modules on first use
    (see ``COMMANDS``); ``--help`` lists them from ``COMMANDS`` without importing any."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loaded: set[str] = set()

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.loaded:
            self.load(cmd_name)
        return self.commands.get(cmd_name)

    def load(self, cmd_name: str) -> None:
        """Import the module that defines ``cmd_name`` (it registers it on this group) and give
        every command under it its own ``-v``."""
        self.loaded.add(cmd_name)
        importlib.import_module(_CLI + COMMANDS[cmd_name][0])
        command = self.commands.get(cmd_name)
        if isinstance(command, click.Group):
            verbose_everywhere(command)
        elif command is not None:
            verbose_everywhere(click.Group(commands=[command]))

    def load_all(self) -> None:
        """Import every command (for documentation generators and tests)."""
        for name in COMMANDS:
            self.get_command(click.Context(self), name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            (name, click.Command(name, help=short_help).get_short_help_str(limit))
            for name, (_, short_help) in sorted(COMMANDS.items())
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)
