"""``HandlerProcesses`` with real child processes: results and exceptions come back (as text
when they do not pickle), a process that dies fails its call with its exit code, a killed
call's process is gone at once with the processes it started, calls beyond the pool's size wait
for a process, and shutdown kills what runs."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from queuey._runtime.processes import HandlerProcesses, ProcessDiedError
from tests.process_handlers import (
    Unpicklable,
    exit_hard,
    grandchildren,
    kill_all,
    lives,
    raise_unloadable,
    raise_unpicklable,
    return_unpicklable,
    sleep_for,
    start_grandchild_and_hang,
)


@pytest.fixture
def pool() -> Iterator[HandlerProcesses]:
    processes = HandlerProcesses(2, "test-handler")
    yield processes
    processes.shutdown()


def test_results_and_errors_come_back_as_text_when_they_do_not_pickle(
    pool: HandlerProcesses,
) -> None:
    assert pool.submit(sleep_for, 0.0).result(60) == "slept 0.0"
    with pytest.raises(RuntimeError, match=r"exception cannot be sent back.*Unpicklable"):
        pool.submit(raise_unpicklable).result(60)
    with pytest.raises(RuntimeError, match="reply could not be read: cannot be rebuilt"):
        pool.submit(raise_unloadable).result(60)
    with pytest.raises(RuntimeError, match="return value cannot be sent back"):
        pool.submit(return_unpicklable).result(60)
    with pytest.raises(TypeError, match="cannot be sent to a process"):
        pool.submit(sleep_for, Unpicklable()).result(60)
    assert pool.processes <= 2


def test_a_process_that_dies_fails_its_call_with_its_exit_code_and_is_replaced(
    pool: HandlerProcesses,
) -> None:
    for _ in range(4):  # each time: the code is read once the process is reaped
        with pytest.raises(ProcessDiedError, match=r"process ended \(exit code 3\)"):
            pool.submit(exit_hard).result(60)
    assert pool.submit(sleep_for, 0.0).result(60) == "slept 0.0"


def test_kill_ends_the_processes_the_handler_started_too(
    pool: HandlerProcesses, tmp_path: Path
) -> None:
    pidfile = tmp_path / "sleeper"
    try:
        stuck = pool.submit(start_grandchild_and_hang, str(pidfile))
        deadline = time.monotonic() + 60
        while not grandchildren(pidfile) and time.monotonic() < deadline:
            time.sleep(0.01)
        (sleeper,) = grandchildren(pidfile)
        assert lives(sleeper)
        assert pool.kill(stuck)
        deadline = time.monotonic() + 2
        while lives(sleeper) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not lives(sleeper), "the process the handler started was killed with it"
    finally:
        kill_all(pidfile)


def test_kill_ends_the_process_at_once_and_frees_its_place(pool: HandlerProcesses) -> None:
    started: list[float] = []
    stuck = pool.start(sleep_for, (60.0,), started.append)
    while not started:
        time.sleep(0.01)
    (child,) = [c for c in pool._children if c.run is not None]
    pid = child.process.pid
    assert pid is not None
    began = time.monotonic()
    assert pool.kill(stuck)
    assert time.monotonic() - began < 2
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(ProcessDiedError):
        stuck.result(5)
    assert pool.submit(sleep_for, 0.0).result(60) == "slept 0.0"


def test_calls_beyond_the_size_wait_and_shutdown_kills_what_runs() -> None:
    pool = HandlerProcesses(1, "test-handler")
    first = pool.submit(sleep_for, 60.0)
    second = pool.submit(sleep_for, 0.0)
    time.sleep(0.2)
    assert not second.done() and pool.processes == 1
    assert not pool.kill(second), "a waiting call is dropped, not killed"
    with pytest.raises(ProcessDiedError, match="dropped"):
        second.result(1)
    pool.shutdown()
    with pytest.raises(ProcessDiedError):
        first.result(10)
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(sleep_for, 0.0)
