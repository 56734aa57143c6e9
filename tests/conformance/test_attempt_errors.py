"""Every failed attempt's error is kept with its job, in one shape for typed jobs and topic
messages, on every backend that keeps job state (PostgreSQL, memory): the exception's type,
its message, a bounded traceback, when (the backend's clock) and which worker; the latest
``MAX_ATTEMPT_ERRORS`` of them. Each failure is logged with its traceback at its outcome's
level."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from queuey import Job, JobContext, Producer, Queue, QueueSet, RetryPolicy, Worker
from queuey.attempts import MAX_ATTEMPT_ERRORS, MAX_MESSAGE_BYTES, MAX_TRACEBACK_BYTES
from queuey.backends.base import Backend, JobInfo, JobLookup
from queuey.topics import App, MessageContext, QueuesConfig
from tests.helpers import run_until


def _lookup(backend: Backend) -> JobLookup:
    if type(backend).__name__ == "RabbitMqBackend":
        pytest.skip("RabbitMQ keeps no job state: the worker's log has each error")
    assert isinstance(backend, JobLookup)
    return backend


def _kit(attempts: int) -> tuple[type[QueueSet], type[Job[Any]]]:
    prefix = f"e{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        orders = Queue(retry=RetryPolicy.fixed(attempts, "10ms"))

    class Price(Job[Queues], queue=Queues.orders, name=f"{prefix}.Price"):
        size: int = 10

    return Queues, Price


def price_lookup(order: dict[str, Any]) -> Any:
    return order["price"]


async def _failed_job(backend: Backend, attempts: int, size: int = 10) -> JobInfo:
    lookup = _lookup(backend)
    queues, price = _kit(attempts)
    producer = await Producer.create(queues, backend)
    worker = Worker(queues, backend)

    @worker.handler(price)
    async def handle(job: Any, ctx: JobContext) -> None:
        if ctx.attempt % 2:
            price_lookup({"size": job.size})
        raise RuntimeError("x" * job.size)

    job_id = await producer.enqueue(price(size=size))
    await run_until(worker, lambda: worker.stats[queues.all()[0].name].dead == 1, timeout=60)
    info = await lookup.job(job_id)
    assert info is not None and info.state == "failed"
    return info


async def test_every_attempt_error_is_kept_with_type_traceback_time_and_worker(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    with caplog.at_level(logging.WARNING, logger="queuey.worker"):
        info = await _failed_job(backend, attempts=2)
    assert info.last_error == "max attempts (2) exhausted after attempt 2: xxxxxxxxxx"
    first, second = info.errors
    assert (first.attempt, first.type, first.message) == (1, "KeyError", "'price'")
    assert (second.attempt, second.type, second.message) == (2, "RuntimeError", "x" * 10)
    assert first.traceback is not None and first.traceback.endswith("KeyError: 'price'")
    assert "in price_lookup" in first.traceback and 'return order["price"]' in first.traceback
    lines = first.traceback.splitlines()  # from the handler down; queuey's own frames left out
    assert lines[0] == "Traceback (most recent call last):"
    assert "test_attempt_errors.py" in lines[1] and "in handle" in lines[1]
    assert "_runtime" not in first.traceback
    assert second.traceback is not None and "RuntimeError: xxxxxxxxxx" in second.traceback
    for error in info.errors:
        assert error.at is not None and before <= error.at <= datetime.now(UTC) + timedelta(
            seconds=5
        )
        assert error.worker  # the process that ran it
    logged = {(r.levelname, r.exc_info[0]) for r in caplog.records if r.exc_info}
    assert logged == {("WARNING", KeyError), ("ERROR", RuntimeError)}
    assert all(r.exc_info[2] is not None for r in caplog.records if r.exc_info)


async def test_the_history_is_bounded_in_count_and_size(backend: Backend) -> None:
    info = await _failed_job(backend, attempts=MAX_ATTEMPT_ERRORS + 3, size=MAX_MESSAGE_BYTES * 2)
    assert [e.attempt for e in info.errors] == list(range(4, MAX_ATTEMPT_ERRORS + 4))
    longest = max(info.errors, key=lambda e: len(e.message))
    assert len(longest.message.encode()) <= MAX_MESSAGE_BYTES + 3 and longest.message.endswith("…")
    for error in info.errors:
        assert error.traceback is not None
        assert len(error.traceback.encode()) <= MAX_TRACEBACK_BYTES + 3


async def test_a_topic_message_keeps_its_errors_in_the_same_shape(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    lookup = _lookup(backend)
    topic = f"t{uuid.uuid4().hex[:8]}.paid"
    app = App(QueuesConfig(subscribe={topic: "charge"}, max_attempts=2, retry_backoff_secs=0))
    calls: list[int] = []

    @app.function
    async def charge(payload: Any, context: MessageContext) -> None:
        calls.append(context.attempts)
        if len(calls) == 1:
            price_lookup(payload)
        raise RuntimeError("card declined")

    subscriber = app.subscriber(backend)
    publication = await app.publisher(backend).publish(topic, {"order": 7})
    with caplog.at_level(logging.WARNING, logger="queuey.topics"):
        await run_until(subscriber, lambda: subscriber.stats[topic].dead == 1, timeout=30)
    logged = [(r.levelname, r.exc_info[0]) for r in caplog.records if r.exc_info]
    assert logged == [("WARNING", KeyError), ("ERROR", RuntimeError)]
    info = await lookup.job(publication.id)
    assert info is not None and info.state == "failed"
    first, second = info.errors
    assert (first.attempt, first.type, first.message) == (1, "KeyError", "'price'")
    assert (second.attempt, second.type, second.message) == (2, "RuntimeError", "card declined")
    assert first.traceback is not None and "in price_lookup" in first.traceback
    assert first.at is not None and first.worker
