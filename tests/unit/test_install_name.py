"""Every install instruction names the distribution ``queuey-jobs`` (``queuey`` on the package
index is another project), and a missing extra is answered with its install command."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from queuey._extras import DISTRIBUTION, install_hint

ROOT = Path(__file__).resolve().parents[2]

# `pip install queuey`, `pip install 'queuey[x]'`, `queuey[x]` ... but not `queuey-jobs`.
WRONG = re.compile(r"pip install\s+['\"]?queuey(?![-\w])|(?<![-\w/.])queuey\[")


def _texts() -> list[Path]:
    paths = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for folder, pattern in (("docs", "*.md"), ("src", "*.py"), ("examples", "*.py")):
        paths += sorted((ROOT / folder).rglob(pattern))
    paths += sorted((ROOT / "src").rglob("*.html"))
    return paths


def test_the_distribution_name_is_the_one_the_hints_use() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION == "queuey-jobs"
    assert project["scripts"] == {"queuey": "queuey.cli:main"}
    assert install_hint("rabbitmq") == "pip install 'queuey-jobs[rabbitmq]'"


def test_no_install_instruction_names_the_other_project() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _texts()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if WRONG.search(line)
    ]
    assert found == []


_WITHOUT = """
import sys
for name in {modules!r}:
    sys.modules[name] = None  # as if the extra were not installed: importing it fails
sys.argv = ["queuey", *{argv!r}]
from queuey.cli import main
main()
"""


@pytest.mark.parametrize(
    ("modules", "argv", "hint"),
    [
        (["aio_pika"], ["demo", "--backend", "rabbitmq", "--amqp-url", "amqp://x"], "rabbitmq"),
        (["aiormq"], ["demo", "--backend", "rabbitmq", "--amqp-url", "amqp://x"], "rabbitmq"),
    ],
)
def test_a_missing_extra_is_one_line_with_its_install_command(
    modules: list[str], argv: list[str], hint: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT.format(modules=modules, argv=argv)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and install_hint(hint) in line, line
    assert line.count("pip install") == 1, line  # said once


@pytest.mark.parametrize(("command", "hint"), [("dashboard", "dashboard"), ("serve", "http")])
def test_a_command_of_a_missing_extra_says_what_to_install_once(
    tmp_path: Path, command: str, hint: str
) -> None:
    config = tmp_path / "app.toml"
    config.write_text("")
    argv = [command, "--config", str(config)]
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT.format(modules=["starlette", "jinja2"], argv=argv)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and install_hint(hint) in line, line
    assert line.count("pip install") == 1 and line.count("needs the") == 1, line


@pytest.mark.parametrize(
    ("missing", "module", "message"),
    [
        (
            "aio_pika",
            "queuey.backends.rabbitmq",
            "the RabbitMQ backend needs the rabbitmq extra: pip install 'queuey-jobs[rabbitmq]' "
            "(no module named 'aio_pika')",
        ),
        (
            "starlette",
            "queuey.http",
            "the HTTP endpoint needs the http extra: pip install 'queuey-jobs[http]' "
            "(no module named 'starlette')",
        ),
        (
            "jinja2",
            "queuey.dashboard",
            "the dashboard needs the dashboard extra: pip install 'queuey-jobs[dashboard]' "
            "(no module named 'jinja2')",
        ),
    ],
)
def test_importing_an_extras_module_without_it_says_what_to_install(
    missing: str, module: str, message: str
) -> None:
    code = (
        f"import sys; sys.modules[{missing!r}] = None\n"
        f"try:\n    import {module}\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == message
