"""Helpers shared by the test modules."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def python_path() -> str:
    """``PYTHONPATH`` for a child process: this checkout's ``src`` first (not the copy a shared
    virtualenv may have installed), then the repository root (for ``tests.*`` apps)."""
    return os.pathsep.join([str(SRC), str(ROOT), os.environ.get("PYTHONPATH", "")])


class Runnable(Protocol):
    """A ``Worker`` or a topic ``Subscriber``."""

    async def run(self) -> None: ...

    def shutdown(self, *, force: bool = False) -> None: ...


async def run_until(runner: Runnable, done: Callable[[], bool], timeout: float = 15) -> None:
    """Run ``runner`` until ``done()`` holds (failing if it stops first or ``timeout`` seconds
    pass), then shut it down gracefully."""
    task = asyncio.create_task(runner.run())
    try:
        async with asyncio.timeout(timeout):
            while not done():
                assert not task.done(), task.exception() if task.done() else None
                await asyncio.sleep(0.01)
    finally:
        runner.shutdown()
        await task
