"""Quorum queues on a three-node cluster, one node killed with SIGKILL mid-drain: every
confirmed job is handled at least once (read from the handler's own records), duplicates are
no more than the jobs in flight, the worker resumes within 10 s, and dead letters and delayed
retries survive too; publishes in flight when a node dies are confirmed or fail in time."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from queuey import (
    BackendError,
    Fatal,
    Job,
    JobContext,
    Producer,
    Queue,
    QueueSet,
    Retry,
    RetryPolicy,
    Worker,
)
from queuey.backends.rabbitmq import RabbitMqBackend, RabbitMqOptions
from tests.integration.cluster.conftest import Cluster

pytestmark = pytest.mark.cluster

TOTAL = 10_000
PREFETCH = 50
RESUME_WITHIN = 10.0  # seconds: the longest pause in handling the kill may cause
OPTIONS = RabbitMqOptions(
    queue_type="quorum",
    publish_timeout=timedelta(seconds=15),
    reconnect_initial=timedelta(seconds=0.1),
    reconnect_max=timedelta(seconds=1),
)


def fatal(n: int) -> bool:
    return n % 1000 == 7


def flaky(n: int) -> bool:
    return n % 500 == 3


@dataclass
class Records:
    """What the handler saw: each success (and when), when each job it dead-lettered ran, and
    when each job that fails once first ran (its retry then waits 2 s in a hold queue)."""

    done: list[int] = field(default_factory=list)
    at: list[float] = field(default_factory=list)
    fatal_at: list[float] = field(default_factory=list)
    retried_at: list[float] = field(default_factory=list)

    def retry_held(self, now: float) -> bool:
        """Whether a retry is waiting in the hold queue at ``now`` (with a margin)."""
        return any(now - 1.5 < at <= now for at in self.retried_at)

    def handled(self) -> set[int]:
        return set(self.done)


def make_kit() -> tuple[type[QueueSet], type[Job[Any]]]:
    prefix = f"cl{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        work = Queue(max_priority=0, prefetch=PREFETCH, retry=RetryPolicy.fixed(2, "2s"))

    class Task(Job[Queues], queue=Queues.work, name=f"{prefix}.Task"):
        n: int

    return Queues, Task


def worker_of(
    queues: type[QueueSet], task: type[Job[Any]], backend: RabbitMqBackend, records: Records
) -> Worker[Any]:
    worker: Worker[Any] = Worker(queues, backend)

    @worker.handler(task)
    async def handle(job: Any, ctx: JobContext) -> None:
        if fatal(job.n):
            records.fatal_at.append(time.monotonic())
            raise Fatal(f"job {job.n} cannot be done")
        if flaky(job.n) and ctx.attempt == 1:
            records.retried_at.append(time.monotonic())
            raise Retry(f"job {job.n} fails once")
        records.done.append(job.n)
        records.at.append(time.monotonic())

    return worker


async def wait_for(
    check: Callable[[], bool], timeout: float, what: str | Callable[[], str]
) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not check():
                await asyncio.sleep(0.05)
    except TimeoutError:
        said = what if isinstance(what, str) else what()
        raise AssertionError(f"not within {timeout:g}s: {said}") from None


def longest_pause(at: list[float], since: float) -> float:
    """The longest wait between two successes (or ``since`` and the first) after ``since``."""
    after = [since, *sorted(t for t in at if t >= since)]
    return max(later - earlier for earlier, later in itertools.pairwise(after))


@pytest.mark.parametrize("victim", ["queue leader", "worker's node"])
async def test_a_drain_survives_a_node_killed_mid_way(rabbit_cluster: Cluster, victim: str) -> None:
    urls = rabbit_cluster.urls
    queues, task = make_kit()
    queue = task.job_queue().name
    producing = await RabbitMqBackend.connect(urls, OPTIONS)  # node 1: it declares the queues
    consuming = await RabbitMqBackend.connect([urls[1], urls[2], urls[0]], OPTIONS)  # node 2
    records = Records()
    try:
        producer = await Producer.create(queues, producing)
        started = time.monotonic()
        await producer.enqueue_many([task(n=n) for n in range(TOTAL)])
        published = time.monotonic() - started
        worker = worker_of(queues, task, consuming, records)
        running = asyncio.create_task(worker.run())
        await wait_for(lambda: len(records.done) >= TOTAL // 3, 120, "a third drained")
        node = rabbit_cluster.leader(queue) if victim == "queue leader" else 2
        await wait_for(
            lambda: records.retry_held(time.monotonic()), 60, "a retry waiting in a hold queue"
        )
        killed_at = time.monotonic()
        await rabbit_cluster.kill(node)
        held = [at for at in records.retried_at if killed_at - 2 < at < killed_at]
        expected = {n for n in range(TOTAL) if not fatal(n)}
        await wait_for(
            lambda: records.handled() >= expected,
            180,
            lambda: f"every job handled; missing: {sorted(expected - records.handled())[:20]}",
        )
        dead = await consuming.list_dead(queue, limit=200)
        worker.shutdown()
        await running
    finally:
        await producing.close()
        await consuming.close()
    duplicates = len(records.done) - len(records.handled())
    pause = longest_pause(records.at, killed_at)
    print(
        f"\n{victim} (node {node}) killed: {TOTAL} jobs published in {published:.1f}s, "
        f"{duplicates} handled twice, longest pause {pause:.1f}s, {len(held)} retries held, "
        f"{consuming.reconnections} reconnection(s) of the worker"
    )
    assert duplicates <= PREFETCH, duplicates
    assert pause < RESUME_WITHIN, pause
    assert {envelope.payload["n"] for envelope, _ in dead} == {n for n in range(TOTAL) if fatal(n)}
    # what the node's death could have taken: dead letters made before it, and retries waiting
    # in a hold queue when it died (each handled once its 2 s delay ran out, checked above)
    assert any(at < killed_at for at in records.fatal_at)
    assert held, "no retry was waiting in a hold queue at the kill"
    if node == 2:
        assert consuming.reconnections >= 1


async def test_publishes_in_flight_when_a_node_dies_are_confirmed_or_fail_in_time(
    rabbit_cluster: Cluster,
) -> None:
    urls = rabbit_cluster.urls
    queues, task = make_kit()
    producing = await RabbitMqBackend.connect(urls, OPTIONS)  # node 1, which is killed
    consuming = await RabbitMqBackend.connect([urls[2], urls[1], urls[0]], OPTIONS)  # node 3
    confirmed: list[int] = []
    failed: list[tuple[int, float, BaseException]] = []
    stop = asyncio.Event()
    counter = iter(range(10**9))

    async def publish_until_stopped(producer: Producer[Any]) -> None:
        while not stop.is_set():
            n = next(counter)
            started = time.monotonic()
            try:
                await producer.enqueue(task(n=n))
            except BackendError as exc:
                failed.append((n, time.monotonic() - started, exc))
            else:
                confirmed.append(n)

    records = Records()
    try:
        producer = await Producer.create(queues, producing)
        publishers = [asyncio.create_task(publish_until_stopped(producer)) for _ in range(8)]
        await wait_for(lambda: len(confirmed) >= 300, 60, "publishing under way")
        await rabbit_cluster.kill(1)
        before = len(confirmed)
        await wait_for(lambda: len(confirmed) >= before + 300, 60, "publishing resumed")
        stop.set()
        await asyncio.gather(*publishers)
        worker = worker_of(queues, task, consuming, records)
        running = asyncio.create_task(worker.run())
        wanted = {n for n in confirmed if not fatal(n)}
        await wait_for(lambda: records.handled() >= wanted, 120, "every confirmed job handled")
        worker.shutdown()
        await running
    finally:
        await producing.close()
        await consuming.close()
    limit = OPTIONS.publish_timeout.total_seconds() + 2
    assert all(took <= limit for _, took, _ in failed), failed
    assert producing.reconnections >= 1
    print(
        f"\n{len(confirmed)} publishes confirmed, {len(failed)} failed "
        f"({sorted({str(exc) for _, _, exc in failed})[:3]})"
    )
