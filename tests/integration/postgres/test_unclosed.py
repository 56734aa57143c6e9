"""A script that opens a ``PostgresBackend`` and never closes it exits promptly, with its own
traceback, and is warned (``ResourceWarning``) about the line that opened the backend.

Before, ``asyncio.run`` waited forever at exit for the pool's tasks, which took its
cancellation for a failed connection attempt and tried again: the only output was
``error connecting in 'pool-1':`` and the user's exception was never printed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers import python_path

pytestmark = pytest.mark.postgres

SCRIPT = """
import asyncio, sys
from queuey.backends.postgres import PostgresBackend


async def main() -> None:
    backend = await PostgresBackend.connect(sys.argv[1], schema=sys.argv[2])
    await backend.count_pending("nothing")
    if sys.argv[3] == "raise":
        raise ValueError("the script's own error")


asyncio.run(main())
"""


def run_script(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``SCRIPT`` with ``args`` and ResourceWarnings shown; its result and wall time."""
    script = tmp_path / "unclosed.py"
    script.write_text(textwrap.dedent(SCRIPT).lstrip())
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", str(script), *args],
        env={"PYTHONPATH": python_path(), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, time.monotonic() - started


def test_an_unclosed_backend_lets_the_script_fail_with_its_own_traceback(
    tmp_path: Path, database_url: str, pg_schema: str
) -> None:
    done, seconds = run_script(tmp_path, database_url, pg_schema, "raise")
    assert done.returncode == 1, done.stderr
    assert seconds < 30
    assert "Traceback (most recent call last)" in done.stderr
    assert "ValueError: the script's own error" in done.stderr
    assert f"PostgresBackend opened at {tmp_path / 'unclosed.py'}:6 was never closed" in (
        done.stderr
    )
    assert "error connecting" not in done.stderr


def test_an_unclosed_backend_lets_the_script_exit(
    tmp_path: Path, database_url: str, pg_schema: str
) -> None:
    done, seconds = run_script(tmp_path, database_url, pg_schema, "return")
    assert done.returncode == 0, done.stderr
    assert seconds < 30
    assert "ResourceWarning" in done.stderr
    assert "error connecting" not in done.stderr
