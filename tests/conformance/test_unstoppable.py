"""Runs that this process cannot stop, on every backend: a plain (``def``) handler still
running past the worker's ``shutdown_grace`` keeps its job held, and closing the backend
(``close_backend_on_shutdown=True``) waits for it, so its outcome is recorded and the job is
never handed to another worker while it runs; with ``plain_handlers="process"`` a stuck plain
handler is killed past its timeout instead, and its job retried."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from queuey import JobContext, Producer, Worker
from queuey.backends.base import Backend
from tests.conformance.test_conformance import make_kit
from tests.helpers import run_until
from tests.process_handlers import ProcQueues, Stuck, stuck


async def test_closing_the_backend_waits_for_a_plain_handler_past_the_shutdown_grace(
    backend: Backend,
) -> None:
    kit = make_kit()
    producer = await Producer.create(kit.queues, backend)
    worker = Worker(kit.queues, backend, shutdown_grace="200ms", close_backend_on_shutdown=True)
    started = threading.Event()
    ended: list[float] = []

    @worker.handler(kit.Plain)
    def handle(job: Any, ctx: JobContext) -> None:
        started.set()
        time.sleep(1.5)  # cannot be stopped
        ended.append(time.monotonic())

    await producer.enqueue(kit.Plain(n=1))
    running = asyncio.create_task(worker.run())
    await asyncio.to_thread(started.wait, 10)
    worker.shutdown()
    await asyncio.wait_for(running, 15)
    returned = time.monotonic()
    assert ended and returned >= ended[0], "the backend was closed only after the run ended"
    stats = worker.stats[kit.Plain.job_queue().name]
    assert (stats.succeeded, worker.settle_failures) == (1, 0), "its outcome was recorded"


async def test_a_plain_handler_in_a_process_is_killed_past_its_timeout_and_retried(
    backend: Backend, tmp_path: Path
) -> None:
    """``plain_handlers="process"``: the stuck first attempt's process is killed at its
    timeout (nothing of it runs on), the only slot is free again, and the retry succeeds."""
    trace = tmp_path / "trace"
    producer = await Producer.create(ProcQueues, backend)
    worker = Worker(
        ProcQueues, backend, concurrency=1, job_timeout="500ms", plain_handlers="process"
    )
    worker.register(Stuck, stuck)
    await producer.enqueue(Stuck(trace=str(trace)))
    await run_until(worker, lambda: worker.stats[ProcQueues.work.name].succeeded == 1, 60)
    lines = [line.split() for line in trace.read_text().splitlines()]
    first = [(int(pid), float(when)) for attempt, pid, when in lines if attempt == "1"]
    pid, began = first[0]
    assert max(when for _, when in first) <= began + 0.5 + 2.0, "stopped within the bound"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    stats = worker.stats[ProcQueues.work.name]
    assert (stats.retried, stats.succeeded, stats.dead) == (1, 1, 0)
