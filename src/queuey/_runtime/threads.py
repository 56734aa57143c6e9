"""The threads plain (``def``) handlers run in, and what each run knows about its thread.

``HandlerThreads`` is the worker's pool: at most ``size`` threads (the worker's concurrency),
started on demand. Its threads are daemon threads, unlike ``ThreadPoolExecutor``'s (which the
interpreter joins at exit): a handler that cannot be stopped never keeps its process alive past
shutdown, so when the process exits the handler ends with it, and its job, still claimed, is
handed over by the backend's lease (PostgreSQL) as for any lost worker. Until then the job stays
held by this process: it is never handed back while its handler still runs here.

``RunThreads`` is one run's view of a pool (any ``Executor``): what it submitted, whether a
thread still runs it (``running``), and the report of a run that passed its timeout
(``overran``): the thread runs on, the job stays held and its slot taken until the thread ends,
and the pool counts the threads stuck so (``HandlerThreads.stuck``).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

__all__ = ["HandlerThreads", "RunThreads", "mark_retrieved"]

T = TypeVar("T")

log = logging.getLogger("queuey.worker")

_Work = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def mark_retrieved(ended: asyncio.Future[Any]) -> None:
    """Mark what a thread raised as seen (nobody awaits an abandoned run's result)."""
    if not ended.cancelled():
        ended.exception()


class HandlerThreads(Executor):
    """Daemon threads for plain handlers, at most ``size``, each started when work finds no
    idle one.

    Args:
        size: the most threads (>= 1).
        name_prefix: names the threads (``<prefix>_0``, ``<prefix>_1``, ...).
    """

    def __init__(self, size: int, name_prefix: str = "queuey-handler") -> None:
        self.size = size
        self._prefix = name_prefix
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._stuck: set[Future[Any]] = set()
        self._closed = False

    @property
    def stuck(self) -> int:
        """Runs that passed their timeout and whose thread still runs them."""
        with self._lock:
            return len(self._stuck)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` in a thread of the pool.

        Raises:
            RuntimeError: the pool was shut down.
        """
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot run a handler after the pool was shut down")
            self._work.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self.size:
                self._start_thread()
        return future

    def _start_thread(self) -> None:
        name = f"{self._prefix}_{len(self._threads)}"
        thread = threading.Thread(target=self._serve, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _serve(self) -> None:
        while (work := self._work.get()) is not None:
            future, fn, args, kwargs = work
            del work
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # the handler's own: SystemExit included
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs
            self._idle.release()
        self._work.put(None)  # wakes the next thread: every one ends

    def overran(self, future: Future[Any]) -> int:
        """Count ``future``'s run as stuck until it ends; returns how many are stuck now."""
        with self._lock:
            self._stuck.add(future)
            count = len(self._stuck)
        future.add_done_callback(self._unstick)
        return count

    def _unstick(self, future: Future[Any]) -> None:
        with self._lock:
            self._stuck.discard(future)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; idle threads end. Running handlers are never interrupted (a
        daemon thread ends with its process at the latest).

        Args:
            wait: wait for the threads to end (the handlers they run to return).
            cancel_futures: cancel the work not started yet.
        """
        with self._lock:
            self._closed = True
            if cancel_futures:
                while True:
                    try:
                        work = self._work.get_nowait()
                    except queue.Empty:
                        break
                    if work is not None:
                        work[0].cancel()
            self._work.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


Describe = Callable[[], tuple[str, dict[str, Any]]]
"""Names a run for the log, only when something is reported: its label ("job <type> <id>")
and its structured log fields."""


class RunThreads(Executor):
    """One run's use of ``pool``: remembers what it submitted.

    Args:
        pool: where the work runs (the worker's ``HandlerThreads``, or any ``Executor``).
        describe: names the run in what is reported.
        logger: where it is reported.
    """

    def __init__(self, pool: Executor, describe: Describe, logger: logging.Logger = log) -> None:
        self.pool = pool
        self._describe = describe
        self._log = logger
        self._futures: list[Future[Any]] = []

    @property
    def running(self) -> bool:
        """Whether a thread is running this run's work now (started and not ended)."""
        return any(future.running() for future in self._futures)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` in ``pool`` and remember it."""
        future = self.pool.submit(fn, *args, **kwargs)
        self._futures.append(future)
        return future

    def overran(self, limit: float) -> None:
        """Report that this run passed its timeout of ``limit`` seconds while its thread runs
        on: WARNING naming the job and how many threads are stuck; ERROR when they are all of
        them (the worker then claims nothing until one ends)."""
        pool = self.pool
        label, fields = self._describe()
        if not isinstance(pool, HandlerThreads):
            self._log.warning(
                "%s passed its timeout of %gs; its thread cannot be stopped and runs on: the "
                "job stays held until it ends",
                label,
                limit,
                extra=fields,
            )
            return
        stuck = pool.overran(self._futures[-1])
        self._log.warning(
            "%s passed its timeout of %gs; its thread cannot be stopped and runs on: the job "
            "stays held and its slot taken until it ends (%d of %d handler threads stuck)",
            label,
            limit,
            stuck,
            pool.size,
            extra=fields,
        )
        if stuck >= pool.size:
            self._log.error(
                "every handler thread (%d) is stuck past its timeout: this worker claims "
                "nothing until one ends (a worker with plain_handlers='process' kills such "
                "handlers instead)",
                pool.size,
                extra=fields,
            )

    def outlived(self) -> None:
        """Report that this run ended (a middleware or a cancellation gave up on it) while its
        thread runs on: the job stays held and its slot taken until the thread ends."""
        label, fields = self._describe()
        self._log.warning(
            "the run of %s ended while its thread still runs: its outcome is recorded, and "
            "its slot freed, once the thread ends",
            label,
            extra=fields,
        )

    async def ended(self) -> None:
        """Return once no thread runs this run's work."""
        running = [asyncio.wrap_future(future) for future in self._futures if not future.done()]
        for waiting in running:
            waiting.add_done_callback(mark_retrieved)
        if running:
            await asyncio.wait(running)

    def ended_late(self, seconds: float) -> None:
        """Report that the thread of a run that overran ended, ``seconds`` after it started."""
        label, fields = self._describe()
        self._log.warning(
            "the thread of %s ended after %.3fs; the job's timeout is recorded now",
            label,
            seconds,
            extra=fields,
        )

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing: the pool is the worker's, shut down with it."""
