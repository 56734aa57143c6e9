"""Waiting for jobs to end (``MemoryBackend.wait_end``): one future per waiter, resolved when
the store records the job done, failed or cancelled; timeouts run on the event loop's clock,
so they pass in virtual time under looptime."""

from __future__ import annotations

from queuey.backends._waiters import Waiting, await_end, waiter
from queuey.backends.base import JobEnd

__all__ = ["TERMINAL", "Ends"]

TERMINAL = frozenset({"done", "failed", "cancelled"})
"""The states a job ends in."""


class Ends:
    """The futures of the callers waiting for each job to end."""

    def __init__(self) -> None:
        self._waiting: Waiting = {}

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._waiting

    def ended(self, job_id: str, end: JobEnd) -> None:
        """Job ``job_id`` ended as ``end``: wake everyone waiting for it."""
        for future in self._waiting.pop(job_id, ()):
            if not future.done():
                future.set_result(end)

    async def wait(self, job_id: str, timeout: float | None) -> JobEnd | None:
        """Wait for ``ended(job_id, ...)``; ``None`` after ``timeout`` seconds."""
        return await await_end(self._waiting, job_id, waiter(self._waiting, job_id), timeout)
