"""Waiting for jobs to end (``MemoryBackend.wait_end``): one future per waiter, resolved when
the store records the job done, failed or cancelled; timeouts run on the event loop's clock,
so they pass in virtual time under looptime."""

from __future__ import annotations

import asyncio
import contextlib

from queuey.backends.base import JobEnd

__all__ = ["TERMINAL", "Ends"]

TERMINAL = frozenset({"done", "failed", "cancelled"})
"""The states a job ends in."""


class Ends:
    """The futures of the callers waiting for each job to end."""

    def __init__(self) -> None:
        self._waiting: dict[str, list[asyncio.Future[JobEnd]]] = {}

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._waiting

    def ended(self, job_id: str, end: JobEnd) -> None:
        """Job ``job_id`` ended as ``end``: wake everyone waiting for it."""
        for future in self._waiting.pop(job_id, ()):
            if not future.done():
                future.set_result(end)

    async def wait(self, job_id: str, timeout: float | None) -> JobEnd | None:
        """Wait for ``ended(job_id, ...)``; ``None`` after ``timeout`` seconds."""
        future: asyncio.Future[JobEnd] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(job_id, []).append(future)
        try:
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            return None
        finally:
            waiters = self._waiting.get(job_id)
            if waiters is not None:
                with contextlib.suppress(ValueError):
                    waiters.remove(future)
                if not waiters:
                    del self._waiting[job_id]
