"""The six-job tour of seed ``001`` (SEEDS-DIGEST §2.11), run by ``queuey demo``.

Three queues under the prefix ``quickstart``: ``emails`` (prefetch 8, 3 attempts 50 ms apart),
``images`` (prefetch 4, no policy) and ``api`` (prefetch 4, max priority 10). Six jobs: ada and
grace succeed, flaky fails twice then succeeds, not-an-address is fatal, cat.png is resized, and
one API call defers itself 150 ms the first time. Expected: emails acked 5 / dead 1, images
acked 1, api acked 2, nothing pending, one dead letter naming not-an-address.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from queuey.backends.base import Backend
from queuey.errors import Defer, Fatal, Retry
from queuey.jobs import Job, JobContext
from queuey.producer import Producer
from queuey.queues import Queue, QueueSet
from queuey.retry import RetryPolicy
from queuey.worker import Worker

__all__ = ["TourQueues", "TourSummary", "run_tour"]


class TourQueues(QueueSet, prefix="quickstart"):
    """The tour's queues."""

    emails = Queue(prefetch=8, retry=RetryPolicy.fixed(3, "50ms"))
    images = Queue(prefetch=4)
    api = Queue(prefetch=4, max_priority=10)


class SendEmail(Job[TourQueues], queue=TourQueues.emails, name="quickstart.SendEmail"):
    """Send one email; fails retryably on its first ``flaky_for`` attempts."""

    to: str
    flaky_for: int = 0


class ResizeImage(
    Job[TourQueues],
    queue=TourQueues.images,
    name="quickstart.ResizeImage",
    retry=RetryPolicy.exponential(2, base="20ms", max="100ms"),
):
    """Resize one image (never fails here)."""

    path: str


class CallApi(Job[TourQueues], queue=TourQueues.api, name="quickstart.CallApi"):
    """Call a rate-limited API that asks to come back after ``retry_after_ms``."""

    endpoint: str
    retry_after_ms: int = 150


@dataclass
class TourSummary:
    """What the worker observed, per queue, and the dead letters."""

    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """``{"queues": {name: {"acked", "dead", "pending"}}, "dead_letters": [...]}``."""
        return {"queues": self.queues, "dead_letters": self.dead_letters}


def _worker(backend: Backend) -> Worker[TourQueues]:
    worker = Worker(TourQueues, backend)

    @worker.handler(SendEmail)
    async def send_email(job: SendEmail, ctx: JobContext) -> None:
        if "@" not in job.to:
            raise Fatal(f"{job.to} is not a mailbox")
        if ctx.attempt <= job.flaky_for:
            raise Retry(f"mail server busy (attempt {ctx.attempt})")

    @worker.handler(ResizeImage)
    async def resize(job: ResizeImage, ctx: JobContext) -> None:
        await asyncio.sleep(0)

    @worker.handler(CallApi)
    async def call_api(job: CallApi, ctx: JobContext) -> None:
        if ctx.deferrals == 0:
            raise Defer(job.retry_after_ms / 1000, "rate limited")

    return worker


async def _enqueue(producer: Producer[TourQueues]) -> None:
    for to, flaky in (
        ("ada@example.com", 0),
        ("grace@example.com", 0),
        ("flaky@example.com", 2),
        ("not-an-address", 0),
    ):
        await producer.enqueue(SendEmail(to=to, flaky_for=flaky))
    await producer.enqueue(ResizeImage(path="cat.png"))
    await producer.enqueue(CallApi(endpoint="/v1/things"))


async def run_tour(backend: Backend, timeout: float = 30.0) -> TourSummary:
    """Enqueue the six jobs, run a worker until all six are settled, shut it down, and report.

    Args:
        backend: any backend; it is not closed.
        timeout: seconds to wait for the six jobs to settle.

    Raises:
        TimeoutError: the jobs did not settle within ``timeout`` seconds.
    """
    producer = await Producer.create(TourQueues, backend)
    summary = TourSummary()
    worker = _worker(backend)
    await _enqueue(producer)
    running = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(timeout):
            while sum(s.succeeded + s.dead for s in worker.stats.values()) < 6:
                if running.done():
                    break
                await asyncio.sleep(0.01)
    finally:
        worker.shutdown()
        await running
    for queue in TourQueues.all():
        stats = worker.stats[queue.name]
        summary.queues[queue.name] = {
            "acked": stats.acked,
            "dead": stats.dead,
            "pending": await backend.count_pending(queue.name),
        }
    summary.dead_letters = [
        {"queue": env.queue, "job_type": env.job_type, "attempt": env.attempt, "reason": reason}
        for env, reason in worker.dead_letters
    ]
    return summary
