"""The test command's promise not to restart a server nobody allowed it to: a ``serial`` test
skips without permission (naming the variable to set), fails under ``CI=true`` without it,
and runs with ``QUEUEY_TEST_RESTART_SERVERS=1`` or when the test command started the servers
itself (``QUEUEY_TEST_STARTED_SERVERS``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import python_path

SERIAL_TEST = """
import pytest

@pytest.mark.serial
def test_restarts_a_server() -> None:
    pass
"""
PERMISSIONS = ("CI", "QUEUEY_TEST_RESTART_SERVERS", "QUEUEY_TEST_STARTED_SERVERS")


def run_serial_test(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest, with this suite's conftest as a plugin, on one ``serial`` test (which restarts
    nothing) whose server is unknown, so it needs permission for both."""
    (tmp_path / "test_serial.py").write_text(SERIAL_TEST)
    child = {k: v for k, v in os.environ.items() if k not in PERMISSIONS}
    child.update(env, PYTHONPATH=python_path(), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-q", "-rsE", "test_serial.py"],
        cwd=tmp_path,
        env=child,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_without_permission_a_serial_test_skips_naming_the_variable(tmp_path: Path) -> None:
    result = run_serial_test(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout
    assert "QUEUEY_TEST_RESTART_SERVERS=1" in result.stdout


def test_under_ci_without_permission_it_fails(tmp_path: Path) -> None:
    result = run_serial_test(tmp_path, CI="true", QUEUEY_TEST_STARTED_SERVERS="postgres")
    assert result.returncode == 1, result.stdout
    assert "1 error" in result.stdout and "QUEUEY_TEST_RESTART_SERVERS" in result.stdout


@pytest.mark.parametrize(
    "env",
    [
        {"QUEUEY_TEST_RESTART_SERVERS": "1", "CI": "true"},
        {"QUEUEY_TEST_STARTED_SERVERS": "postgres,rabbitmq"},
    ],
)
def test_with_permission_it_runs(tmp_path: Path, env: dict[str, str]) -> None:
    result = run_serial_test(tmp_path, **env)
    assert result.returncode == 0, result.stdout
    assert "1 passed" in result.stdout
