"""Runs that this process cannot stop, on every backend: a plain (``def``) handler still
running past the worker's ``shutdown_grace`` keeps its job held, and closing the backend
(``close_backend_on_shutdown=True``) waits for it, so its outcome is recorded and the job is
never handed to another worker while it runs."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from queuey import JobContext, Producer, Worker
from queuey.backends.base import Backend
from tests.conformance.test_conformance import make_kit


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
