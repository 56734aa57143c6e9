"""The subscriber on ``MemoryBackend``: retries per subscriber, the seed's schedule under virtual
time, functions not loaded, pause and graceful shutdown."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from queuey import MemoryBackend
from queuey.testing import run_until_idle
from queuey.topics import App, MessageContext, QueuesConfig, Subscriber
from queuey.topics._decision import truncate_error
from tests.helpers import run_until as run_runner


async def run_until(subscriber: Subscriber, done: Callable[[], bool]) -> None:
    """Run ``subscriber`` until ``done()`` holds (30 s of loop time at most)."""
    await run_runner(subscriber, done, timeout=30)


@pytest.mark.looptime
async def test_a_failing_message_retries_after_10_20_40_80_seconds_then_fails() -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(subscribe={"order.paid": "charge"}))
    loop = asyncio.get_running_loop()
    runs: list[tuple[int, float]] = []

    @app.function
    async def charge(payload: Any, context: MessageContext) -> None:
        runs.append((context.attempts, loop.time()))
        raise RuntimeError("card declined")

    await app.publisher(backend).publish("order.paid", {"order": 7})
    started = time.monotonic()
    await run_until_idle(app.subscriber(backend), backend, timeout=3600)
    assert [attempt for attempt, _ in runs] == [1, 2, 3, 4, 5]
    waits = [round(b - a) for (_, a), (_, b) in itertools.pairwise(runs)]
    assert waits == [10, 20, 40, 80]
    ((envelope, reason),) = backend.dead_letters("order.paid", "topic")
    assert reason == "RuntimeError: card declined"
    assert (envelope.attempt, envelope.job_type, envelope.payload) == (5, "charge", {"order": 7})
    assert time.monotonic() - started < 5


@pytest.mark.looptime
async def test_max_attempts_one_means_no_retry() -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(max_attempts=1, subscribe={"t": "f"}))
    calls: list[int] = []

    @app.function
    def f(payload: Any) -> None:
        calls.append(1)
        raise ValueError

    await app.publisher(backend).publish("t", {})
    await run_until_idle(app.subscriber(backend), backend)
    assert calls == [1]
    assert backend.dead_letters("t", "topic")[0][1] == "ValueError"


@pytest.mark.looptime
async def test_a_failing_subscriber_never_reruns_the_others() -> None:
    backend = MemoryBackend()
    config = QueuesConfig(
        max_attempts=2,
        retry_backoff_secs=0,
        subscribe={"order.paid": ["fulfil_order", "notify_ops"]},
    )
    app = App(config)
    runs: list[tuple[str, int]] = []

    @app.function
    async def fulfil_order(payload: Any, context: MessageContext) -> None:
        runs.append(("fulfil_order", context.attempts))

    @app.function
    async def notify_ops(payload: Any, context: MessageContext) -> None:
        runs.append(("notify_ops", context.attempts))
        raise ConnectionError("pager down")

    publication = await app.publisher(backend).publish("order.paid", {"order": 1})
    await run_until_idle(app.subscriber(backend), backend)
    assert publication.delivered == 2
    assert runs.count(("fulfil_order", 1)) == 1
    assert [r for r in runs if r[0] == "fulfil_order"] == [("fulfil_order", 1)]
    assert [r for r in runs if r[0] == "notify_ops"] == [("notify_ops", 1), ("notify_ops", 2)]
    ((dead, reason),) = backend.dead_letters("order.paid", "topic")
    assert (dead.job_type, dead.attempt, reason) == ("notify_ops", 2, "ConnectionError: pager down")
    handled = [e.job_type for e in backend.acked("order.paid", "topic") if e.attempt == 1]
    assert "fulfil_order" in handled


@pytest.mark.looptime
async def test_a_function_gets_the_payload_and_the_context() -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(subscribe={"user.signed_up": ["welcome", "crm_sync"]}))
    seen: dict[str, Any] = {}

    @app.function
    async def welcome(payload: Any, context: MessageContext) -> None:
        seen["welcome"] = (payload, context)

    @app.function
    def crm_sync(payload: Any) -> None:
        seen["crm_sync"] = payload

    publication = await app.publisher(backend).publish("user.signed_up", {"id": 3}, "user-1")
    await run_until_idle(app.subscriber(backend), backend)
    payload, context = seen["welcome"]
    assert payload == {"id": 3}
    assert context == MessageContext(
        topic="user.signed_up",
        message_id=publication.id,
        subscriber="welcome",
        attempts=1,
        published_by="user-1",
    )
    assert seen["crm_sync"] == {"id": 3}


async def test_a_plain_function_runs_in_a_thread_not_on_the_loop() -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(subscribe={"t": "blocking"}))
    threads: list[int] = []

    @app.function
    def blocking(payload: Any) -> None:
        time.sleep(0.05)
        threads.append(threading.get_ident())

    await app.publisher(backend).publish("t", {})
    await run_until_idle(app.subscriber(backend), backend, timeout=10)
    assert threads and threads[0] != threading.get_ident()


@pytest.mark.looptime
async def test_a_plain_callable_returning_a_coroutine_is_awaited() -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(subscribe={"t": "wrapped"}))
    done: list[Any] = []

    async def inner(payload: Any) -> None:
        done.append(payload)

    app.register("wrapped", lambda payload: inner(payload))
    await app.publisher(backend).publish("t", 5)
    await run_until_idle(app.subscriber(backend), backend)
    assert done == [5]


@pytest.mark.looptime
async def test_a_function_not_loaded_is_reported_then_fails_its_messages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(max_attempts=3, subscribe={"user.signed_up": "send_welcome"}))
    await app.publisher(backend).publish("user.signed_up", {})
    reason = "`send_welcome` is subscribed to `user.signed_up` but no such function is loaded"
    with caplog.at_level(logging.WARNING, logger="queuey.topics"):
        await run_until_idle(app.subscriber(backend), backend, timeout=3600)
    startup = [r for r in caplog.records if r.getMessage() == reason]
    assert startup and startup[0].levelno == logging.ERROR
    ((envelope, dead_reason),) = backend.dead_letters("user.signed_up", "topic")
    assert (dead_reason, envelope.attempt) == (reason, 3)
    retries = [r for r in caplog.records if "will retry" in r.getMessage()]
    assert len(retries) == 2


@pytest.mark.looptime
async def test_a_disabled_app_records_but_handles_nothing_until_resumed() -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(enabled=False, subscribe={"t": "f"}))
    handled: list[Any] = []

    @app.function
    async def f(payload: Any) -> None:
        handled.append(payload)

    subscriber = app.subscriber(backend)
    assert subscriber.paused
    task = asyncio.create_task(subscriber.run())
    for n in range(3):
        await app.publisher(backend).publish("t", n)
    await asyncio.sleep(3600)
    assert handled == []
    assert backend.pending("t", "topic") == 3
    subscriber.resume()
    async with asyncio.timeout(10):
        await backend.wait_idle()
    subscriber.shutdown()
    await task
    assert sorted(handled) == [0, 1, 2]


@pytest.mark.looptime
async def test_pause_stops_taking_messages_and_resume_picks_them_up() -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(subscribe={"t": "f"}))
    handled: list[Any] = []

    @app.function
    async def f(payload: Any) -> None:
        handled.append(payload)

    subscriber = app.subscriber(backend)
    task = asyncio.create_task(subscriber.run())
    await app.publisher(backend).publish("t", "before")
    async with asyncio.timeout(10):
        await backend.wait_idle()
    subscriber.pause()
    subscriber.pause()  # idempotent
    await app.publisher(backend).publish("t", "while paused")
    await asyncio.sleep(600)
    assert handled == ["before"]
    assert subscriber.in_flight == 0
    assert backend.pending("t", "topic") == 1
    subscriber.resume()
    async with asyncio.timeout(10):
        await backend.wait_idle()
    subscriber.shutdown()
    await task
    assert handled == ["before", "while paused"]


@pytest.mark.looptime
async def test_shutdown_waits_for_running_functions() -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(subscribe={"t": "slow"}))
    started = asyncio.Event()
    finished: list[bool] = []

    @app.function
    async def slow(payload: Any) -> None:
        started.set()
        await asyncio.sleep(5)
        finished.append(True)

    await app.publisher(backend).publish("t", {})
    subscriber = app.subscriber(backend)
    task = asyncio.create_task(subscriber.run())
    await started.wait()
    subscriber.shutdown()
    await task
    assert finished == [True]
    assert len(backend.acked("t", "topic")) == 1


@pytest.mark.looptime
async def test_a_function_past_the_shutdown_grace_is_cancelled_and_handed_back() -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(subscribe={"t": "stuck"}))
    started = asyncio.Event()

    @app.function
    async def stuck(payload: Any) -> None:
        started.set()
        await asyncio.sleep(3600)

    await app.publisher(backend).publish("t", {})
    subscriber = app.subscriber(backend, shutdown_grace="5s")
    task = asyncio.create_task(subscriber.run())
    await started.wait()
    subscriber.shutdown()
    await task
    assert backend.pending("t", "topic") == 1
    assert backend.dead_letters("t", "topic") == []
    assert backend._queue("t", "topic").pending[0].envelope.attempt == 1


@pytest.mark.looptime
async def test_a_long_error_is_cut_to_4000_bytes() -> None:
    backend = MemoryBackend()
    app = App(QueuesConfig(max_attempts=1, subscribe={"t": "loud"}))

    @app.function
    def loud(payload: Any) -> None:
        raise RuntimeError("é" * 5000)

    await app.publisher(backend).publish("t", {})
    await run_until_idle(app.subscriber(backend), backend)
    reason = backend.dead_letters("t", "topic")[0][1]
    assert reason.endswith("…")
    assert len(reason.encode()) <= 4003
    assert reason.startswith("RuntimeError: ééé")


def test_truncation_respects_character_boundaries() -> None:
    assert truncate_error("short") == "short"
    assert truncate_error("x" * 4000) == "x" * 4000
    assert truncate_error("x" * 4001) == "x" * 4000 + "…"
    cut = truncate_error("a" + "é" * 2500)  # 'é' is 2 bytes: byte 4000 splits one
    assert cut == "a" + "é" * 1999 + "…"
    assert len(truncate_error("€" * 2000).encode()) <= 4003


@pytest.mark.looptime
async def test_nothing_subscribed_idles_until_shutdown(caplog: pytest.LogCaptureFixture) -> None:
    subscriber = App().subscriber(MemoryBackend())
    task = asyncio.create_task(subscriber.run())
    await asyncio.sleep(60)
    assert not task.done()
    subscriber.shutdown()
    await task
    assert "nothing to handle" in caplog.text


def test_concurrency_defaults_to_batch_and_must_be_positive() -> None:
    backend = MemoryBackend()
    assert App(QueuesConfig(batch=4)).subscriber(backend).concurrency == 4
    with pytest.raises(ValueError, match="concurrency"):
        App().subscriber(backend, concurrency=0)


async def test_run_twice_at_once_is_refused() -> None:
    subscriber = App(QueuesConfig(subscribe={"t": "f"})).subscriber(MemoryBackend())
    task = asyncio.create_task(subscriber.run())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="already running"):
        await subscriber.run()
    subscriber.shutdown()
    await task


@pytest.mark.looptime
async def test_each_topic_is_consumed_as_a_topic_queue_of_batch_prefetch() -> None:
    backend = MemoryBackend()
    config = QueuesConfig(batch=3, subscribe={"a": "f", "b": "f"})
    subscriber = App(config).subscriber(backend)
    await run_until_idle(subscriber, backend)
    assert backend.queue_names("topic") == ["a", "b"]
    declared = backend.queue_config("a", "topic")
    assert (declared.kind, declared.prefetch, declared.max_priority) == ("topic", 3, 0)
