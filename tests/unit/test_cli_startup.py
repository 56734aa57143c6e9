"""``queuey --version`` and ``queuey --help`` import no command and none of the heavy libraries
(so they answer in well under 150 ms), and the lazy command table matches the commands."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from queuey.cli import main
from queuey.cli._lazy import COMMANDS, LazyGroup

HEAVY = (
    "asyncio",
    "pydantic",
    "psycopg",
    "psycopg_pool",
    "rich",
    "cronsim",
    "starlette",
    "jinja2",
    "aio_pika",
    "aiormq",
    "queuey.worker",
    "queuey.jobs",
    "queuey.backends",
    *("queuey.cli." + module for module, _ in COMMANDS.values()),
)

_PROBE = """
import json, sys
sys.argv = ["queuey", *json.loads(sys.argv[1])]
from queuey.cli import main
try:
    main()
except SystemExit:
    pass
sys.stdout.flush()
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""


def modules_after(*args: str) -> tuple[str, set[str]]:
    """Run ``queuey ARGS`` in a fresh interpreter: its output and every module it imported."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    output, _, modules = done.stdout.rpartition("\nMODULES ")
    return output, set(json.loads(modules))


@pytest.mark.parametrize("args", [("--version",), ("--help",)])
def test_version_and_help_import_nothing_heavy(args: tuple[str, ...]) -> None:
    output, modules = modules_after(*args)
    assert output.strip(), "the command printed nothing"
    loaded = sorted(
        name for name in modules if any(name == h or name.startswith(h + ".") for h in HEAVY)
    )
    assert loaded == [], f"queuey {' '.join(args)} imported {loaded}"


def test_help_lists_every_command() -> None:
    output, _ = modules_after("--help")
    listed = [line.split()[0] for line in output.split("Commands:")[1].splitlines() if line]
    assert listed == sorted(COMMANDS)


def test_a_command_is_imported_when_run() -> None:
    output, modules = modules_after("db", "--help")
    assert "migrate" in output
    assert "queuey.cli._db" in modules


def test_the_lazy_table_matches_the_commands() -> None:
    assert isinstance(main, LazyGroup)
    main.load_all()
    assert sorted(main.commands) == sorted(COMMANDS), "a command is missing from _lazy.COMMANDS"
    for name, (_, short_help) in COMMANDS.items():
        command = main.commands[name]
        assert command.get_short_help_str(limit=1000) == short_help, name
        assert any(p.name == "verbose" for p in _leaf(command).params), name


def _leaf(command: click.Command) -> click.Command:
    while isinstance(command, click.Group):
        command = next(iter(command.commands.values()))
    return command


_TREE = """
import importlib, json, pkgutil, sys
import click
import queuey.cli
from queuey.cli import main
if sys.argv[1] == "all":  # every module of the package, as if each registered something
    for module in pkgutil.iter_modules(queuey.cli.__path__):
        importlib.import_module("queuey.cli." + module.name)
else:
    main.load_all()
def walk(group, prefix):
    for name, command in group.commands.items():
        yield prefix + name
        if isinstance(command, click.Group):
            yield from walk(command, prefix + name + " ")
print(json.dumps(sorted(walk(main, ""))))
"""


def _tree(how: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _TREE, how], capture_output=True, text=True, timeout=60, check=True
    )
    tree: list[str] = json.loads(done.stdout)
    return tree


def test_every_command_any_module_registers_is_reached_through_the_lazy_table() -> None:
    lazy = _tree("lazy")
    assert "jobs show" in lazy and "schedules pause" in lazy and "db migrate" in lazy
    assert lazy == _tree("all"), "a command module is missing from _lazy.COMMANDS"
