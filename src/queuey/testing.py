"""Helpers for testing an application's handlers with ``MemoryBackend`` and no real waiting.

```python
@pytest.mark.looptime
async def test_welcome_email() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(AppQueues, backend)
    await producer.enqueue(SendEmail(to="a@b.c"))
    assert len(enqueued(backend, SendEmail)) == 1
    await run_until_idle(build_worker(backend), backend)
    assert backend.dead_letters("myapp.emails") == []
```
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from queuey.backends.memory import MemoryBackend
from queuey.jobs import Job

__all__ = ["Runnable", "enqueued", "run_until_idle"]


class Runnable(Protocol):
    """What ``run_until_idle`` drives: a ``Worker`` or a topic ``Subscriber``."""

    async def run(self) -> None:
        """Consume until ``shutdown``."""
        ...

    def shutdown(self) -> None:
        """Ask ``run`` to return gracefully."""
        ...


async def run_until_idle(worker: Runnable, backend: MemoryBackend, timeout: float = 60.0) -> None:
    """Run ``worker`` (or a topic ``Subscriber``) until ``backend`` has nothing pending,
    delayed, held or in flight, then shut it down gracefully. Under virtual time (looptime)
    delays cost no wall time.

    Args:
        worker: the worker to run (it must not be running).
        backend: the memory backend it consumes.
        timeout: seconds of (loop) time to wait for idleness.

    Raises:
        TimeoutError: the backend did not become idle within ``timeout``.
    """
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(timeout):
            idle = asyncio.ensure_future(backend.wait_idle())
            await asyncio.wait([idle, task], return_when=asyncio.FIRST_COMPLETED)
            idle.cancel()
    finally:
        worker.shutdown()
        await task


def enqueued(backend: MemoryBackend, job_type: type[Job[Any]]) -> list[Job[Any]]:
    """The jobs of ``job_type`` waiting in ``backend`` (pending, not delayed), decoded."""
    return [
        job_type.model_validate(envelope.payload)
        for envelope in backend.pending_envelopes(job_type.job_queue().name)
        if envelope.job_type == job_type.job_name()
    ]
