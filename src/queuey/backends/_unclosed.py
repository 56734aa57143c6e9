"""Closing a backend its program forgot to close, when the event loop shuts down.

A backend keeps tasks running for as long as it is open: the psycopg pool's workers and
scheduler, aiormq's reader and writer. At exit, ``asyncio.run`` cancels every task once and
waits for them all; the pool's workers take that cancellation for one more failed connection
attempt and try again, so the wait never ends, and the program's own exception is never
printed. A ``LoopGuard`` started by ``open`` waits for that cancellation and closes its
backend then, so the program exits and shows its traceback. It also warns, with a
``ResourceWarning`` that names the line that opened the backend, as asyncio and psycopg do for
objects left open (shown with ``python -W default`` or ``-X dev``, and under pytest).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Awaitable, Callable

__all__ = ["LoopGuard"]

log = logging.getLogger("queuey.backends")

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PLUMBING = ("asyncio", "contextlib")


def _opener() -> tuple[str, int]:
    """``(file, line)`` of the first caller outside queuey and the asyncio plumbing: the
    program's line that opened the backend (``connect``, ``async with``, ``open``)."""
    frame = sys._getframe(1)
    last = (frame.f_code.co_filename, frame.f_lineno)
    while frame is not None:
        filename = frame.f_code.co_filename
        last = (filename, frame.f_lineno)
        inside = os.path.abspath(filename).startswith(_PACKAGE + os.sep)
        plumbing = os.path.basename(os.path.dirname(filename)) == "asyncio" or any(
            os.path.basename(filename) == f"{name}.py" for name in _PLUMBING
        )
        if not inside and not plumbing:
            break
        frame = frame.f_back  # type: ignore[assignment]
    return last


class LoopGuard:
    """Closes one backend when its event loop shuts down with the backend still open.

    Args:
        what: how the warning names the backend ("PostgresBackend").
        close: the backend's ``close``.
    """

    def __init__(self, what: str, close: Callable[[], Awaitable[None]]) -> None:
        self._what = what
        self._close = close
        self._task: asyncio.Task[None] | None = None
        self._opened_at = ("<unknown>", 0)

    def start(self) -> None:
        """The backend just opened: remember where, and watch the running loop."""
        self._opened_at = _opener()
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._watch(), name=f"queuey-guard {self._what}")

    def stop(self) -> None:
        """The backend is being closed by its program: stop watching (no warning)."""
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _watch(self) -> None:
        try:
            await asyncio.get_running_loop().create_future()  # until cancelled
        except asyncio.CancelledError:
            if self._task is None:
                raise  # stopped by close()
            self._task = None
            try:
                self._warn()
            finally:
                with contextlib.suppress(Exception):
                    await self._close()
            raise

    def _warn(self) -> None:
        filename, line = self._opened_at
        message = (
            f"{self._what} opened at {filename}:{line} was never closed; it was closed as the "
            f"event loop shut down. Open it with `async with` or call `await backend.close()`"
        )
        log.debug("%s", message)
        warnings.warn_explicit(message, ResourceWarning, filename, line)
