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
from queuey.envelope import Kind
from queuey.jobs import Job

__all__ = ["Runnable", "describe_busy", "enqueued", "run_until_idle"]


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
        TimeoutError: the backend did not become idle within ``timeout``; the message says what
            was still pending, delayed, held or running, per queue.
        RuntimeError: ``worker.run()`` returned before the backend was idle (a worker that was
            shut down before, by an earlier ``run_until_idle``, does not run again: build a new
            one); the message says what was left.
    """
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(timeout):
            idle = asyncio.ensure_future(backend.wait_idle())
            try:
                await asyncio.wait([idle, task], return_when=asyncio.FIRST_COMPLETED)
            finally:
                idle.cancel()
    except TimeoutError:
        busy = describe_busy(backend) + _unhandled(worker, backend)
        raise TimeoutError(
            f"run_until_idle: the queues were not idle after {timeout:g} loop-seconds; still {busy}"
        ) from None
    finally:
        worker.shutdown()
        await task
    if not backend.is_idle():
        raise RuntimeError(
            f"run_until_idle: {type(worker).__name__}.run() returned before the queues were "
            f"idle (a worker that was shut down does not run again: build a new one); still "
            f"{describe_busy(backend)}"
        )


def _unhandled(worker: Runnable, backend: MemoryBackend) -> str:
    """ "; no handler in this worker for X, Y: ..." when pending jobs of the queues ``worker`` (a
    ``Worker``) consumes are of job types it has no handler for, which it never claims (""
    otherwise)."""
    handles = getattr(worker, "handles", None)
    if handles is None:
        return ""
    consumed = [queue.config.name for queue in getattr(worker, "queues", ())]
    pending = {e.job_type for q in consumed for e in backend.pending_envelopes(q)}
    missing = sorted(job_type for job_type in pending if not handles(job_type))
    if not missing:
        return ""
    return (
        f"; no handler in this worker for {', '.join(missing)}: a worker claims only the job "
        "types it has handlers for, so those stay pending (register their handlers)"
    )


def describe_busy(backend: MemoryBackend) -> str:
    """What keeps ``backend`` from being idle, e.g. "on myapp.emails: 1 pending
    (myapp.SendEmail), 2 delayed; 1 delivery running"."""
    parts = []
    for kind in ("job", "topic"):
        for queue in backend.queue_names(kind):
            counts = _counts(backend, queue, kind)
            if counts:
                where = queue if kind == "job" else f"topic {queue}"
                parts.append(f"on {where}: {', '.join(counts)}")
    running = backend.in_flight()
    if running:
        parts.append(f"{running} deliver{'y' if running == 1 else 'ies'} running (not settled)")
    return "; ".join(parts) or "nothing (it became idle as the time ran out)"


def _counts(backend: MemoryBackend, queue: str, kind: Kind) -> list[str]:
    """ "N pending (types)", "N delayed", "N deferred" for one queue, those that are not 0."""
    envelopes = backend.pending_envelopes(queue, kind)
    counts = []
    if envelopes:
        types = ", ".join(sorted({envelope.job_type for envelope in envelopes}))
        counts.append(f"{len(envelopes)} pending ({types})")
    for label, number in (
        ("delayed (a delay or a retry's backoff)", backend.delayed(queue, kind)),
        ("deferred", backend.deferred(queue, kind)),
    ):
        if number:
            counts.append(f"{number} {label}")
    return counts


def enqueued(backend: MemoryBackend, job_type: type[Job[Any, Any]]) -> list[Job[Any, Any]]:
    """The jobs of ``job_type`` waiting in ``backend`` (pending, not delayed), decoded."""
    return [
        job_type.model_validate(envelope.payload)
        for envelope in backend.pending_envelopes(job_type.job_queue().name)
        if envelope.job_type == job_type.job_name()
    ]
