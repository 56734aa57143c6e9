"""Plain handlers' threads on their own: the worker's pool (daemon threads, never more than its
size), a plain handler's timeout counted from its start and its overrun reported while the run
waits for the thread, and the slots a worker's consumers share."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from queuey._runtime.invoke import HandlerTimeoutError, invoke
from queuey._runtime.slots import Slots
from queuey._runtime.threads import HandlerThreads, RunThreads


def test_the_pool_runs_daemon_threads_and_never_more_than_its_size() -> None:
    pool = HandlerThreads(2, "t")
    release = threading.Event()
    names: list[str] = []

    def work() -> bool:
        names.append(threading.current_thread().name)
        release.wait(5)
        return threading.current_thread().daemon

    futures = [pool.submit(work) for _ in range(3)]
    time.sleep(0.2)
    assert sorted(names) == ["t_0", "t_1"], "the third waits for a thread"
    release.set()
    assert [future.result(5) for future in futures] == [True, True, True]
    pool.shutdown()


def test_shutdown_leaves_a_running_handler_running_and_cancels_what_waits() -> None:
    pool = HandlerThreads(1)
    release = threading.Event()
    running = pool.submit(release.wait, 5)
    waiting = pool.submit(lambda: None)
    time.sleep(0.1)
    pool.shutdown(wait=False, cancel_futures=True)
    assert running.running() and waiting.cancelled()
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)
    release.set()
    assert running.result(5) is True


async def test_a_plain_handler_timeout_counts_from_its_start() -> None:
    # The only thread is busy for as long as the timeout, then the handler runs far less than
    # the timeout: counted from the submission it would time out (it cannot end before
    # QUEUED + RUNS > TIMEOUT, however loaded the machine), counted from its start it has
    # TIMEOUT - RUNS seconds of margin for a slow thread or event loop.
    queued, runs, timeout = 1.5, 0.2, 1.5
    busy = ThreadPoolExecutor(1)
    busy.submit(time.sleep, queued)
    began = time.monotonic()

    def quick() -> str:
        time.sleep(runs)
        return "done"

    result = await invoke(
        quick, (), is_async=False, executor=busy, timeout=timedelta(seconds=timeout)
    )
    assert result == "done" and time.monotonic() - began >= queued + runs
    busy.shutdown()


async def test_a_plain_handler_past_its_timeout_is_waited_for_then_timed_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool = HandlerThreads(1)
    threads = RunThreads(pool, lambda: ("job t.Slow 1", {}))
    ended: list[float] = []

    def slow() -> None:
        time.sleep(0.5)
        ended.append(time.monotonic())

    with caplog.at_level(logging.WARNING, logger="queuey.worker"):
        try:
            await invoke(slow, (), is_async=False, executor=threads, timeout=timedelta(seconds=0.1))
        except HandlerTimeoutError as exc:
            assert str(exc) == "job timed out after 0.1s"
            assert ended, "raised only once the thread has ended"
        else:
            raise AssertionError("no timeout")
    assert pool.stuck == 0
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("job t.Slow 1 passed its timeout of 0.1s")
    assert "(1 of 1 handler threads stuck)" in messages[0]
    assert messages[1] == "every handler thread (1) is stuck past its timeout: this worker " + (
        "claims nothing until one ends (a worker with plain_handlers='process' kills such "
        "handlers instead)"
    )
    assert messages[2].startswith("the thread of job t.Slow 1 ended after 0.5")
    pool.shutdown()


async def test_a_run_whose_thread_runs_says_so() -> None:
    pool = HandlerThreads(1)
    threads = RunThreads(pool, lambda: ("job t.Slow 1", {}))
    release = threading.Event()
    task = asyncio.create_task(invoke(release.wait, (5,), is_async=False, executor=threads))
    while not threads.running:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert threads.running, "cancelling the run does not stop its thread"
    release.set()
    while threads.running:
        await asyncio.sleep(0.01)
    pool.shutdown()


async def test_slots_are_taken_given_and_waited_for_in_turn() -> None:
    slots = Slots(3)
    woken: list[str] = []
    unwatch = slots.watch(lambda: woken.append("watcher"))
    assert slots.take(2) == 2 and slots.take(5) == 1 and slots.free == 0
    first = asyncio.create_task(slots.acquire())
    second = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    assert slots.take(1) == 0, "a waiting acquire comes first"
    slots.give()
    await asyncio.sleep(0)
    assert first.done() and not second.done() and woken == []
    slots.give(2)
    await asyncio.sleep(0)
    assert second.done() and slots.free == 1 and woken == ["watcher"]
    unwatch()
    slots.give()
    assert woken == ["watcher"] and slots.free == 2
