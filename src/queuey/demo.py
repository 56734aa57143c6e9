"""The six-job tour run by ``queuey demo``: three queues, six jobs, every outcome once.

Three queues under a prefix (``quickstart`` unless ``queuey demo --prefix`` says otherwise, so
two demos on one broker or database do not share queues): ``emails`` (prefetch 8, 3 attempts
50 ms apart), ``images`` (prefetch 4, no policy) and ``api`` (prefetch 4, max priority 10). Six
jobs: ada and grace succeed, flaky fails twice then succeeds, not-an-address is fatal, cat.png
is resized, and one API call defers itself 150 ms the first time. Expected: emails acked 5 /
dead 1, images acked 1, api acked 2, nothing pending, one dead letter naming not-an-address.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from queuey.backends.base import Backend
from queuey.envelope import Envelope
from queuey.errors import Defer, Fatal, Retry
from queuey.jobs import Job, JobContext
from queuey.producer import Producer
from queuey.queues import Queue, QueueSet
from queuey.retry import RetryPolicy
from queuey.worker import Worker

__all__ = ["DEFAULT_PREFIX", "Tour", "TourSummary", "declare_tour", "run_tour"]

DEFAULT_PREFIX = "quickstart"


class Email(BaseModel):
    """What ``SendEmail`` carries: one email; fails retryably on its first ``flaky_for``
    attempts."""

    to: str
    flaky_for: int = 0


class Image(BaseModel):
    """What ``ResizeImage`` carries: one image to resize (never fails here)."""

    path: str


class ApiCall(BaseModel):
    """What ``CallApi`` carries: a rate-limited API call that asks to come back after
    ``retry_after_ms``."""

    endpoint: str
    retry_after_ms: int = 150


@dataclass(frozen=True)
class Tour:
    """The tour's queue set and its three job classes, declared under one prefix."""

    queues: type[QueueSet]
    send_email: type[Job[Any, Any]]
    resize_image: type[Job[Any, Any]]
    call_api: type[Job[Any, Any]]


@functools.cache
def declare_tour(prefix: str = DEFAULT_PREFIX) -> Tour:
    """The tour's queues (``<prefix>.emails``, ``<prefix>.images``, ``<prefix>.api``) and jobs
    (``<prefix>.SendEmail``, ``<prefix>.ResizeImage``, ``<prefix>.CallApi``).

    Raises:
        ConfigError: ``prefix`` is empty or makes a queue name too long.
    """

    class TourQueues(QueueSet, prefix=prefix):
        emails = Queue(prefetch=8, retry=RetryPolicy.fixed(3, "50ms"))
        images = Queue(prefetch=4)
        api = Queue(prefetch=4, max_priority=10)

    class SendEmail(Job[TourQueues], Email, queue=TourQueues.emails, name=f"{prefix}.SendEmail"):
        pass

    class ResizeImage(
        Job[TourQueues],
        Image,
        queue=TourQueues.images,
        name=f"{prefix}.ResizeImage",
        retry=RetryPolicy.exponential(2, base="20ms", max="100ms"),
    ):
        pass

    class CallApi(Job[TourQueues], ApiCall, queue=TourQueues.api, name=f"{prefix}.CallApi"):
        pass

    return Tour(TourQueues, SendEmail, ResizeImage, CallApi)


@dataclass
class TourSummary:
    """What the worker observed, per queue, the dead letters, and how many of the tour's jobs
    were settled for good (succeeded or dead-lettered: 6 when the tour completes)."""

    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    settled: int = 0

    def as_json(self) -> dict[str, Any]:
        """``{"queues": {name: {"acked", "dead", "pending"}}, "dead_letters": [...],
        "settled": n}``."""
        return {"queues": self.queues, "dead_letters": self.dead_letters, "settled": self.settled}


class _Tally:
    """The outcomes of this tour's own six jobs, as the worker recorded them (a message left
    on a broker by an interrupted earlier run is handled but not counted)."""

    def __init__(self, tour: Tour) -> None:
        self.ours: set[str] = set()
        self.finished: set[str] = set()
        self.queues = {q.name: {"acked": 0, "dead": 0} for q in tour.queues.all()}
        self.dead_letters: list[dict[str, Any]] = []

    def __call__(self, envelope: Envelope, outcome: str, text: str) -> None:
        if envelope.job_id not in self.ours:
            return
        counts = self.queues[envelope.queue]
        if outcome == "dead":
            counts["dead"] += 1
            self.dead_letters.append(
                {
                    "queue": envelope.queue,
                    "job_type": envelope.job_type,
                    "attempt": envelope.attempt,
                    "reason": text,
                }
            )
        else:
            counts["acked"] += 1
        if outcome in ("dead", "succeeded"):
            self.finished.add(envelope.job_id)


def _worker(tour: Tour, backend: Backend, tally: _Tally) -> Worker[Any]:
    # The API job defers for 150 ms: below the worker's default shortest deferral (1 s).
    worker: Worker[Any] = Worker(tour.queues, backend, on_settled=tally, min_defer="100ms")

    @worker.handler(tour.send_email)
    async def send_email(job: Email, ctx: JobContext) -> None:
        if "@" not in job.to:
            raise Fatal(f"{job.to} is not a mailbox")
        if ctx.attempt <= job.flaky_for:
            raise Retry(f"mail server busy (attempt {ctx.attempt})")

    @worker.handler(tour.resize_image)
    async def resize(job: Image, ctx: JobContext) -> None:
        await asyncio.sleep(0)

    @worker.handler(tour.call_api)
    async def call_api(job: ApiCall, ctx: JobContext) -> None:
        if ctx.deferrals == 0:
            raise Defer(job.retry_after_ms / 1000, "rate limited")

    return worker


async def _enqueue(tour: Tour, producer: Producer[Any]) -> set[str]:
    emails = [
        ("ada@example.com", 0),
        ("grace@example.com", 0),
        ("flaky@example.com", 2),
        ("not-an-address", 0),
    ]
    ids: set[str] = {
        await producer.enqueue(tour.send_email(to=to, flaky_for=flaky)) for to, flaky in emails
    }
    ids.add(await producer.enqueue(tour.resize_image(path="cat.png")))
    ids.add(await producer.enqueue(tour.call_api(endpoint="/v1/things")))
    return ids


async def run_tour(
    backend: Backend, timeout: float = 30.0, *, prefix: str = DEFAULT_PREFIX
) -> TourSummary:
    """Enqueue the six jobs, run a worker until all six are settled, shut it down, and report.

    Args:
        backend: any backend; it is not closed.
        timeout: seconds to wait for the six jobs to settle.
        prefix: the tour's queue prefix (``declare_tour``).

    Raises:
        TimeoutError: the jobs did not settle within ``timeout`` seconds.
        ConfigError: a bad ``prefix``.
    """
    tour = declare_tour(prefix)
    producer: Producer[Any] = await Producer.create(tour.queues, backend)
    tally = _Tally(tour)
    worker = _worker(tour, backend, tally)
    tally.ours = await _enqueue(tour, producer)
    running = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(timeout):
            while tally.finished != tally.ours and not running.done():
                await asyncio.sleep(0.01)
    finally:
        worker.shutdown()
        await running
    summary = TourSummary(dead_letters=tally.dead_letters, settled=len(tally.finished))
    for name, counts in tally.queues.items():
        summary.queues[name] = {**counts, "pending": await backend.count_pending(name)}
    return summary
