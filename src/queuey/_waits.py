"""Waiting for the first of several things to happen (a stop, a resume, a wake-up), shared by
the runtime, the backends and the dashboard."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

__all__ = ["first_of"]


async def first_of(*waits: Awaitable[object], timeout: float | None = None) -> None:
    """Return when the first of ``waits`` completes, or after ``timeout`` seconds (``None``: no
    limit); the others are cancelled and awaited before it returns (or raises), so none is
    left pending. What the first one returned or raised is not looked at.

    Raises:
        asyncio.CancelledError: the caller was cancelled (every wait is cancelled too).
    """
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
