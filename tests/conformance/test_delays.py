"""A delay the backend cannot hold is refused before anything is written, on every backend; the
longest one it says it holds (``max_delay``) is written, retried and deferred without a
failure."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from queuey import (
    Backend,
    ConfigError,
    Defer,
    Job,
    JobContext,
    Producer,
    Queue,
    QueueSet,
    Retry,
    RetryPolicy,
    Worker,
)
from queuey.durations import MAX_DURATION
from tests.helpers import run_until

PROPERTY = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def make_set(retry: RetryPolicy | None = None) -> tuple[type[QueueSet], type[Job[Any]]]:
    prefix = f"d{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        work = Queue(retry=retry)

    class Task(Job[Queues], queue=Queues.work, name=f"{prefix}.Task"):
        n: int = 0

    return Queues, Task


async def attempts(producer: Producer[Any], task: type[Job[Any]], delay: Any) -> dict[str, str]:
    """Each way of enqueueing with ``delay``: ``"ok"`` or the ``ConfigError``'s text."""
    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "enqueue_after": lambda: producer.enqueue_after(task(), delay),
        "defer": lambda: producer.defer(task(), delay),
        "enqueue_many": lambda: producer.enqueue_many([task(), task()], delay=delay),
    }
    outcomes = {}
    for name, call in calls.items():
        try:
            await call()
        except ConfigError as exc:
            outcomes[name] = str(exc)
        else:
            outcomes[name] = "ok"
    return outcomes


@PROPERTY
@given(
    seconds=st.one_of(
        st.integers(0, 10**12),
        st.integers(-2, 2).map(lambda d: int(MAX_DURATION.total_seconds()) + d),
        st.sampled_from([86400 * 24.8, 2_147_483, 2_147_484, 86400 * 30]),
    )
)
async def test_a_delay_is_held_or_refused_before_anything_is_written(
    backend: Backend, seconds: float
) -> None:
    queues, task = make_set()
    producer = await Producer.create(queues, backend)
    delay = timedelta(seconds=seconds)
    outcomes = await attempts(producer, task, f"{seconds}s")
    if delay > backend.max_delay:
        event("refused")
        for name, text in outcomes.items():
            assert text.startswith(f"{name} delay: "), text
            assert "longer than" in text
    else:
        event("held")
        assert set(outcomes.values()) == {"ok"}
    if delay > timedelta(seconds=30):  # held, or never written
        assert await backend.count_pending(task.job_queue().name) == 0


async def test_the_longest_delay_a_backend_holds_is_retried_and_deferred(
    backend: Backend,
) -> None:
    longest = backend.max_delay
    queues, task = make_set(RetryPolicy.fixed(2, longest))
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend)

    @worker.handler(task)
    async def handle(job: Any, ctx: JobContext) -> None:
        if job.n == 1:
            raise Retry("later")
        raise Defer(longest, "much later")

    await producer.enqueue_many([task(n=1), task(n=2)])
    await producer.enqueue_after(task(n=3), longest)
    await run_until(worker, lambda: done(worker))
    stats = worker.stats[task.job_queue().name]
    assert (stats.retried, stats.deferred, stats.dead, worker.settle_failures) == (1, 1, 0, 0)
    await asyncio.sleep(0.2)
    assert await backend.count_pending(task.job_queue().name) == 0


def done(worker: Worker[Any]) -> bool:
    """Two outcomes recorded (or not), the third job still held."""
    return (
        worker.settle_failures + sum(s.retried + s.deferred + s.dead for s in worker.stats.values())
        >= 2
    )


async def test_a_retry_policy_longer_than_the_backend_holds_is_refused_at_declaration(
    backend: Backend,
) -> None:
    too_long = backend.max_delay + timedelta(seconds=1)
    if too_long > MAX_DURATION:
        pytest.skip("this backend holds every delay queuey takes")
    for policy in (
        RetryPolicy.fixed(2, too_long),
        RetryPolicy.exponential(3, base=too_long, max=too_long),
        RetryPolicy.exponential(40, base="1s", max=too_long),
    ):
        queues, _ = make_set(policy)
        with pytest.raises(ConfigError, match=r"retry: waits up to .* longer than"):
            await Producer.create(queues, backend)
    queues, _ = make_set(RetryPolicy.exponential(3, base="1s", max=too_long))
    await Producer.create(queues, backend)  # it never waits more than 2s
