"""The futures of callers waiting for jobs to end (``wait_end``), keyed by job id: shared by
the memory and PostgreSQL backends, which differ only in how they learn that a job ended."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TypeAlias

from queuey.backends.base import JobEnd

__all__ = ["Waiting", "await_end", "waiter"]

Waiting: TypeAlias = dict[str, list[asyncio.Future[JobEnd]]]
"""The futures of the callers waiting for each job, by job id."""


def waiter(waiting: Waiting, job_id: str) -> asyncio.Future[JobEnd]:
    """A new future for one caller waiting for job ``job_id``, registered in ``waiting``."""
    future: asyncio.Future[JobEnd] = asyncio.get_running_loop().create_future()
    waiting.setdefault(job_id, []).append(future)
    return future


async def await_end(
    waiting: Waiting, job_id: str, future: asyncio.Future[JobEnd], timeout: float | None
) -> JobEnd | None:
    """``future``'s end; ``None`` after ``timeout`` seconds (``None``: no limit). Either way
    ``future`` leaves ``waiting`` (and ``job_id`` with its last future)."""
    try:
        async with asyncio.timeout(timeout):
            return await future
    except TimeoutError:
        return None
    finally:
        futures = waiting.get(job_id)
        if futures is not None:
            with contextlib.suppress(ValueError):
                futures.remove(future)
            if not futures:
                del waiting[job_id]
