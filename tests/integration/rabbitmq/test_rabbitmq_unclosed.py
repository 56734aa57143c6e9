"""A script that opens a ``RabbitMqBackend`` and never closes it exits promptly with its own
traceback and nothing else: no "Task was destroyed but it is pending", no "Future exception
was never retrieved", only a ``ResourceWarning`` naming the line that opened the backend."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from aio_pika.abc import AbstractConnection

from tests.conftest import unique
from tests.helpers import python_path

pytestmark = pytest.mark.rabbitmq

SCRIPT = """
import asyncio, sys
from queuey import QueueConfig
from queuey.backends.rabbitmq import RabbitMqBackend


async def main() -> None:
    backend = await RabbitMqBackend.connect(sys.argv[1])
    await backend.declare([QueueConfig(sys.argv[3], durable=False)])
    await backend.purge([sys.argv[3]])
    if sys.argv[2] == "raise":
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


@pytest.mark.parametrize("ending", ["raise", "return"])
async def test_an_unclosed_backend_lets_the_script_end_cleanly(
    tmp_path: Path, amqp_url: str, raw: AbstractConnection, ending: str
) -> None:
    queue = unique("unclosed")
    try:
        done, seconds = await asyncio.to_thread(run_script, tmp_path, amqp_url, ending, queue)
    finally:
        channel = await raw.channel()
        for name in (queue, f"{queue}.dead"):
            await channel.queue_delete(name)
    assert done.returncode == (1 if ending == "raise" else 0), done.stderr
    assert seconds < 30
    opened = f"{tmp_path / 'unclosed.py'}:7: ResourceWarning: RabbitMqBackend opened at"
    lines = done.stderr.splitlines()
    assert lines[0].startswith(opened), done.stderr
    if ending == "raise":
        assert lines[-1] == "ValueError: the script's own error", done.stderr
    else:
        assert len(lines) == 2, done.stderr  # the warning and its source line
    for noise in ("Task was destroyed", "never retrieved", "never awaited"):
        assert noise not in done.stderr
