"""Calling a handler: a coroutine function on the event loop, a plain one in a thread (never on
the loop) or in a child process (``HandlerProcesses``), either under an optional timeout.

A plain handler's timeout counts from the moment its thread starts running it (read in the
thread), never from when it was submitted. A plain handler that passes its timeout cannot be
stopped: the run waits for its thread to end, so the job stays held (never handed to another
run while this one executes) and its slot taken (so the worker claims less), reported through
``RunThreads.overran``; then the timeout is its outcome (retryable, like any failure). A run
cancelled while its thread runs (shutdown past its grace) leaves the thread running;
``RunThreads.running`` tells the runner not to hand the job back.

A plain handler run in a process can be stopped: past its timeout, or when its run is
cancelled (a cancelled job past its grace, shutdown past its grace), the process is killed
before ``invoke`` returns or raises, so nothing of the run goes on and its slot is free. The
handler gets its arguments pickled; a context (``RunControls``) goes without its run's
controls (``ctx.cancelled`` is false, ``ctx.transaction()`` unavailable in the process).
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import inspect
import time
from collections.abc import Callable
from concurrent.futures import Executor
from datetime import timedelta
from typing import Any

from queuey._run_scope import RunControls
from queuey._runtime.processes import HandlerProcesses
from queuey._runtime.threads import RunThreads, mark_retrieved

__all__ = [
    "HandlerTimeoutError",
    "invoke",
    "is_coroutine_callable",
    "run_handler",
    "run_returning",
]


class HandlerTimeoutError(TimeoutError):
    """The handler ran past its timeout; retryable."""


async def invoke(
    call: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    is_async: bool,
    executor: Executor,
    timeout: timedelta | None = None,
) -> Any:
    """Call ``call(*args)`` and return its result.

    Args:
        call: the handler.
        args: its positional arguments.
        is_async: ``call`` returns an awaitable (run on the loop) rather than a value (run in
            ``executor``).
        executor: the threads for plain handlers (a ``RunThreads`` reports an overrun).
        timeout: the longest the call may take (``None``: no limit), counted from its start.

    Raises:
        HandlerTimeoutError: the call took longer than ``timeout`` (a plain one: raised once
            its thread has ended).
        Exception: whatever the handler raised.
    """
    if is_async and timeout is None:  # the common case, one coroutine frame less per job
        return await call(*args)
    limit = None if timeout is None else timeout.total_seconds()
    if is_async:
        return await _on_loop(call, args, limit)
    pool = executor.pool if isinstance(executor, RunThreads) else executor
    if isinstance(pool, HandlerProcesses):
        return await _in_process(call, args, pool, limit)
    began, result = await _in_thread(call, args, executor, limit)
    if inspect.isawaitable(result):  # a plain callable that returned a coroutine: run it too
        left = None if limit is None else max(limit - (time.monotonic() - began), 0.0)
        return await _on_loop(_awaiting(result), (), left, limit)
    return result


async def _on_loop(
    call: Callable[..., Any], args: tuple[Any, ...], left: float | None, limit: float | None = None
) -> Any:
    if left is None:
        return await call(*args)
    async with asyncio.timeout(left) as scope:
        try:
            return await call(*args)
        except asyncio.CancelledError:
            if scope.expired():
                whole = left if limit is None else limit
                raise HandlerTimeoutError(f"job timed out after {whole:g}s") from None
            raise


async def _in_thread(
    call: Callable[..., Any], args: tuple[Any, ...], executor: Executor, limit: float | None
) -> tuple[float, Any]:
    """Run ``call(*args)`` in ``executor``; returns when the thread started (monotonic) and
    the result."""
    loop = asyncio.get_running_loop()
    started: asyncio.Future[float] = loop.create_future()
    context = contextvars.copy_context()  # the run's trace span, as asyncio.to_thread does

    def run() -> Any:
        _tell(loop, started, time.monotonic())
        return context.run(call, *args)

    # run_in_executor, not submit: virtual-time loops (looptime) know to wait for it.
    ended = loop.run_in_executor(executor, run)
    ended.add_done_callback(mark_retrieved)  # an outcome dropped after a timeout is not "lost"
    try:
        await asyncio.wait([started, ended], return_when=asyncio.FIRST_COMPLETED)
        began = started.result() if started.done() else time.monotonic()
        if limit is None:
            return began, await ended
        left = max(limit - (time.monotonic() - began), 0.0)
        done, _ = await asyncio.wait([ended], timeout=left)
        if not done:
            await _outlive(ended, executor, limit, began)
            raise HandlerTimeoutError(f"job timed out after {limit:g}s")
        return began, ended.result()
    except asyncio.CancelledError:
        ended.cancel()  # stops only a run not started yet; a running thread runs on
        raise


async def _in_process(
    call: Callable[..., Any], args: tuple[Any, ...], pool: HandlerProcesses, limit: float | None
) -> Any:
    """Run ``call(*args)`` in a process of ``pool``; past ``limit`` seconds from its start, or
    when this task is cancelled, kill the process (reaped before this returns or raises)."""
    loop = asyncio.get_running_loop()
    started: asyncio.Future[float] = loop.create_future()
    future = pool.start(call, tuple(_portable(arg) for arg in args), _teller(loop, started))
    ended = asyncio.wrap_future(future)
    ended.add_done_callback(mark_retrieved)
    try:
        if limit is None:
            return await ended
        await asyncio.wait([started, ended], return_when=asyncio.FIRST_COMPLETED)
        began = started.result() if started.done() else time.monotonic()
        left = max(limit - (time.monotonic() - began), 0.0)
        done, _ = await asyncio.wait([ended], timeout=left)
        if not done:
            pool.kill(future)
            raise HandlerTimeoutError(f"job timed out after {limit:g}s; its process was killed")
        return ended.result()
    except asyncio.CancelledError:
        pool.kill(future)
        raise


def _portable(arg: Any) -> Any:
    """``arg`` as sent to a handler process: a context without its run's controls (an event
    loop's future cannot cross to another process)."""
    if isinstance(arg, RunControls) and arg.run_scope is not None:
        arg = copy.copy(arg)
        object.__setattr__(arg, "run_scope", None)
    return arg


def _teller(
    loop: asyncio.AbstractEventLoop, started: asyncio.Future[float]
) -> Callable[[float], None]:
    return lambda when: _tell(loop, started, when)


async def _outlive(
    ended: asyncio.Future[Any], executor: Executor, limit: float, began: float
) -> None:
    """Wait for the thread of a run that passed its timeout, reporting it; whatever the
    handler then returns or raises is dropped (the timeout is the outcome)."""
    if isinstance(executor, RunThreads):
        executor.overran(limit)
    await asyncio.wait([ended])
    if isinstance(executor, RunThreads):
        executor.ended_late(time.monotonic() - began)


def _tell(loop: asyncio.AbstractEventLoop, started: asyncio.Future[float], when: float) -> None:
    """Resolve ``started`` with ``when`` from a handler thread (the loop may be closed)."""

    def resolve() -> None:
        if not started.done():
            started.set_result(when)

    try:
        loop.call_soon_threadsafe(resolve)
    except RuntimeError:  # the loop is closed: nobody waits any more
        pass


def _awaiting(awaitable: Any) -> Callable[[], Any]:
    async def wait() -> Any:
        return await awaitable

    return wait


def is_coroutine_callable(call: object) -> bool:
    """True for an ``async def`` function, a partial of one, or an object whose ``__call__``
    is ``async def``."""
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(
        getattr(call, "__call__", None)  # noqa: B004
    )


async def run_handler(
    call: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    is_async: bool,
    executor: Executor,
    timeout: timedelta | None = None,
) -> BaseException | None:
    """``invoke`` the handler and return what it raised (``None`` on success).

    Whatever the handler raises is its failure, ``SystemExit``, ``KeyboardInterrupt`` and a
    ``CancelledError`` of its own included: none of them may stop the worker or leave the job
    unsettled. Only the cancellation of the worker's own task (shutdown past its grace)
    propagates.
    """
    try:
        await invoke(call, args, is_async=is_async, executor=executor, timeout=timeout)
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        return exc
    except BaseException as exc:
        return exc
    return None


async def run_returning(
    call: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    is_async: bool,
    executor: Executor,
    timeout: timedelta | None = None,
) -> tuple[BaseException | None, Any]:
    """``invoke`` the handler: ``(None, what it returned)``, or ``(what it raised, None)``,
    with the same rules as ``run_handler``."""
    try:
        value = await invoke(call, args, is_async=is_async, executor=executor, timeout=timeout)
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        return exc, None
    except BaseException as exc:
        return exc, None
    return None, value
