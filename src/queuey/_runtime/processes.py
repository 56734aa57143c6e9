"""Child processes for plain (``def``) handlers that must be stoppable: the worker's
``plain_handlers="process"``.

A thread cannot be stopped, so a plain handler stuck past its ``job_timeout`` holds its slot
until it returns. A process can be killed. ``HandlerProcesses`` keeps at most ``size`` child
processes (the worker's concurrency), each started when a run finds no idle one (``spawn``:
a fresh interpreter that imports the handler's module, never a ``fork`` of a process running
threads and an event loop) and reused for the next runs. A run sends the handler and its
arguments to an idle child through a pipe (pickled: the handler by reference, so it must be
defined at module level), the child reports when it starts calling it and what it returned or
raised. ``kill(run)`` ends the child running it with SIGKILL at once (its slot is free as soon
as the child is reaped, within milliseconds); the next run starts a fresh child.

Each child leads a process group of its own (``setsid``), which the processes its handler
starts join: a kill, a child that ends during a run (a crash), and a child whose parent process
is gone (checked every ``ORPHAN_CHECK`` seconds) take the whole group down, so nothing of a
run outlives the kill nor the worker process that started it. A child ignores SIGINT (a Ctrl-C
in the terminal is the worker's to handle).

A spawned child imports the main module again; a script that starts a worker at import (no
``if __name__ == "__main__":`` guard) would run again in each child: ``refuse_while_starting``
stops it there with an error naming the guard, and the run fails saying so.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from queuey.errors import ConfigError

__all__ = ["ORPHAN_CHECK", "HandlerProcesses", "ProcessDiedError", "refuse_while_starting"]

T = TypeVar("T")

ORPHAN_CHECK = 0.2
"""Seconds between a child's checks that its parent process still lives."""

Started = Callable[[float], None]
"""Told (from a reader thread) the monotonic time at which the child began the call."""

REAP_WAIT = 2.0
"""Seconds a process whose pipe closed is waited for, to read its exit code."""

GUARD = (
    'a script whose handlers run in processes needs the `if __name__ == "__main__":` guard '
    "around the code that starts the worker (each handler process imports the main module "
    "again)"
)


class ProcessDiedError(RuntimeError):
    """The process running the handler ended before the handler returned (killed, or crashed)."""


def refuse_while_starting() -> None:
    """Refuse to run handlers in processes from a process that is still starting (importing
    its parent's main module again).

    Raises:
        ConfigError: this process is a handler process importing a script that starts a
            worker outside an ``if __name__ == "__main__":`` guard.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise ConfigError(f"a worker was started while a handler process was starting: {GUARD}")


class _Run:
    """One call sent to a child: its future and who to tell when it starts."""

    __slots__ = ("future", "started")

    def __init__(self, future: Future[Any], started: Started | None) -> None:
        self.future = future
        self.started = started


class _Child:
    """One child process, its end of the pipe, and the run it executes now (if any)."""

    def __init__(self, pool: HandlerProcesses, name: str) -> None:
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self.process = context.Process(
            target=_serve, args=(theirs, os.getpid()), name=name, daemon=True
        )
        self.process.start()
        theirs.close()
        self.conn: Connection = ours
        self.run: _Run | None = None
        self.ready = False  # the child finished starting (it imported the main module)
        self.killed = False
        self._pool = pool
        self._reaping = threading.Lock()
        threading.Thread(target=self._read, name=f"{name}-reader", daemon=True).start()

    def send(self, run: _Run, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Start ``fn(*args)`` here (pickling errors fail ``run`` at once)."""
        self.run = run
        try:
            self.conn.send((fn, args))
        except Exception as exc:  # not picklable, or the child is gone
            self.run = None
            self._pool.idle(self)
            run.future.set_exception(
                TypeError(f"the handler or its arguments cannot be sent to a process: {exc}")
            )

    def _read(self) -> None:
        while True:
            try:
                kind, value = self.conn.recv()
            except (EOFError, OSError):
                break
            except Exception as exc:  # a reply this process cannot unpickle
                kind, value = (
                    "raised",
                    RuntimeError(f"the handler's reply could not be read: {exc}"),
                )
            if kind == "ready":
                self.ready = True
                continue
            run = self.run
            if run is None:
                continue
            if kind == "started":
                if run.started is not None:
                    run.started(time.monotonic())
                continue
            self.run = None
            self._pool.idle(self)
            if kind == "returned":
                run.future.set_result(value)
            else:
                run.future.set_exception(value)
        self._ended()

    def _ended(self) -> None:
        run, self.run = self.run, None
        if run is not None:  # what the crashed run started (before the reap frees the number)
            _kill_group(self.process.pid)
        code = self.reap(REAP_WAIT)
        self._pool.gone(self)
        if run is not None and not run.future.done():
            run.future.set_exception(ProcessDiedError(self._why(code)))

    def _why(self, code: int | None) -> str:
        if self.killed:
            return "the handler's process was killed"
        if code is None:
            how = "its exit code unknown"
        elif code < 0:
            how = f"killed by signal {-code}"
        else:
            how = f"exit code {code}"
        if not self.ready:
            return f"the handler's process ended ({how}) while starting, see its output: {GUARD}"
        return f"the handler's process ended ({how})"

    def reap(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for the process to end; its exit code (negative: the
        signal that ended it), ``None`` while it runs."""
        deadline = time.monotonic() + timeout
        with self._reaping:  # one waitpid at a time: a second one would see no child
            self.process.join(timeout)
            # Reaped by another thread (multiprocessing's own cleanup) a moment before its
            # code is stored: wait for it.
            while self.process.exitcode is None and time.monotonic() < deadline:
                time.sleep(0.005)
            return self.process.exitcode

    def kill(self) -> None:
        """End the process and the processes it started now (SIGKILL) and reap it."""
        self.killed = True
        _kill_group(self.process.pid)
        self.process.kill()  # still starting: not yet leading its group
        self.reap(5)
        self.conn.close()

    def stop(self) -> None:
        """Ask an idle process to end."""
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass


class HandlerProcesses(Executor):
    """At most ``size`` child processes running plain handlers, one call at a time each.

    Args:
        size: the most processes (>= 1).
        name_prefix: names the processes (``<prefix>_0``, ...).

    Raises:
        ConfigError: made in a process still starting (see ``refuse_while_starting``).
    """

    def __init__(self, size: int, name_prefix: str = "queuey-handler") -> None:
        refuse_while_starting()
        self.size = size
        self._prefix = name_prefix
        self._lock = threading.Lock()
        self._idle: list[_Child] = []
        self._children: set[_Child] = set()
        self._waiting: deque[tuple[_Run, Callable[..., Any], tuple[Any, ...]]] = deque()
        self._started = 0
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args)`` in a child process (``fn`` and ``args`` must be picklable).

        Raises:
            RuntimeError: the pool was shut down.
            TypeError: keyword arguments were given (a run takes positional ones only).
        """
        if kwargs:
            raise TypeError("a handler process takes positional arguments only")
        return self.start(fn, args)

    def start(
        self, fn: Callable[..., T], args: tuple[Any, ...], started: Started | None = None
    ) -> Future[T]:
        """Run ``fn(*args)`` in a child process; ``started(when)`` is called (from another
        thread) once the child begins the call, ``when`` on this process's monotonic clock.

        Raises:
            RuntimeError: the pool was shut down.
        """
        future: Future[T] = Future()
        future.set_running_or_notify_cancel()
        run = _Run(future, started)
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot run a handler after the pool was shut down")
            child = self._idle.pop() if self._idle else self._new_child()
            if child is None:
                self._waiting.append((run, fn, args))
                return future
        child.send(run, fn, args)
        return future

    def _new_child(self) -> _Child | None:
        if len(self._children) >= self.size:
            return None
        child = _Child(self, f"{self._prefix}_{self._started}")
        self._started += 1
        self._children.add(child)
        return child

    def idle(self, child: _Child) -> None:
        """``child`` finished its run: give it the next waiting one, or keep it idle."""
        with self._lock:
            if self._closed:
                child.stop()
                return
            if not self._waiting:
                self._idle.append(child)
                return
            run, fn, args = self._waiting.popleft()
        child.send(run, fn, args)

    def gone(self, child: _Child) -> None:
        """``child``'s process ended: forget it; a waiting run gets a new process."""
        with self._lock:
            self._children.discard(child)
            if child in self._idle:
                self._idle.remove(child)
            if self._closed or not self._waiting:
                return
            fresh = self._new_child()
            if fresh is None:
                return
            run, fn, args = self._waiting.popleft()
        fresh.send(run, fn, args)

    def kill(self, future: Future[Any]) -> bool:
        """End the process running ``future``'s call now (SIGKILL, reaped before returning);
        ``future`` fails with ``ProcessDiedError``. Returns false when no process runs it (it
        already ended, or still waits: then it is dropped)."""
        with self._lock:
            for run, fn, args in list(self._waiting):
                if run.future is future:
                    self._waiting.remove((run, fn, args))
                    future.set_exception(ProcessDiedError("the call was dropped before it ran"))
                    return False
            running = [
                child for child in self._children if child.run and child.run.future is future
            ]
        for child in running:
            child.kill()
        return bool(running)

    @property
    def processes(self) -> int:
        """Child processes alive now."""
        with self._lock:
            return len(self._children)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work: idle processes end, busy ones are killed (nothing of a run
        outlives the pool), waiting calls fail.

        Args:
            wait: wait for the processes to end.
            cancel_futures: accepted for ``Executor``; waiting calls are always dropped.
        """
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            busy = [child for child in self._children if child not in idle]
            waiting, self._waiting = list(self._waiting), deque()
        for run, _, _ in waiting:
            run.future.set_exception(ProcessDiedError("the pool was shut down"))
        for child in idle:
            child.stop()
        for child in busy:
            child.kill()
        if wait:
            for child in idle:
                child.reap(5)


def _serve(conn: Connection, parent: int) -> None:
    """A child's loop: call what arrives, report its start and its end, until told to stop
    (``None``), the pipe closes, or the parent process is gone."""
    os.setsid()  # a process group of its own, for the processes the handler starts
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    conn.send(("ready", None))
    while True:
        try:
            work = conn.recv()
        except (EOFError, OSError):
            return
        if work is None:
            return
        fn, args = work
        del work
        conn.send(("started", None))
        try:
            reply: tuple[str, Any] = ("returned", fn(*args))
        except BaseException as exc:  # the handler's own: SystemExit included
            reply = ("raised", exc)
        del fn, args
        _reply(conn, reply)


def _reply(conn: Connection, reply: tuple[str, Any]) -> None:
    """Send ``reply``; one that cannot be pickled is sent as text."""
    try:
        conn.send(reply)
    except Exception as exc:
        kind, value = reply
        what = "return value" if kind == "returned" else "exception"
        text = f"{type(value).__name__}: {value}" if kind == "raised" else repr(value)[:200]
        conn.send(
            ("raised", RuntimeError(f"the handler's {what} cannot be sent back ({exc}): {text}"))
        )


def _watch_parent(parent: int) -> None:
    """End this process and its group when its parent is gone (it was re-parented)."""
    while os.getppid() == parent:
        time.sleep(ORPHAN_CHECK)
    os.killpg(0, signal.SIGKILL)
    os._exit(1)


def _kill_group(leader: int | None) -> None:
    """SIGKILL the process group ``leader`` leads (a pid is not reused while a group has its
    number); nothing when there is none (not yet formed, or all its processes ended)."""
    if leader is None:
        return
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
