"""Calling a handler: a coroutine function on the event loop, a plain one in the thread pool
(never on the loop), either under an optional timeout.

A plain handler that passes its timeout cannot be killed: it is abandoned (its thread runs on)
and reported as a timeout (DESIGN §2).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable
from concurrent.futures import Executor
from datetime import timedelta
from typing import Any

__all__ = ["HandlerTimeoutError", "invoke", "is_coroutine_callable", "run_handler"]


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
        executor: the thread pool for plain handlers.
        timeout: the longest the call may take (``None``: no limit).

    Raises:
        HandlerTimeoutError: the call took longer than ``timeout``.
        Exception: whatever the handler raised.
    """
    limit = None if timeout is None else timeout.total_seconds()
    if is_async and limit is None:
        return await call(*args)
    if is_async:
        async with asyncio.timeout(limit) as scope:
            try:
                return await call(*args)
            except asyncio.CancelledError:
                if scope.expired():
                    raise HandlerTimeoutError(f"job timed out after {limit:g}s") from None
                raise
    loop = asyncio.get_running_loop()
    began = time.monotonic()
    future = loop.run_in_executor(executor, functools.partial(call, *args))
    done, _ = await asyncio.wait([future], timeout=limit)
    if not done:
        future.cancel()  # the thread cannot be stopped: it is abandoned and runs on
        raise HandlerTimeoutError(f"job timed out after {limit:g}s")
    result = future.result()
    if inspect.isawaitable(result):  # a plain callable that returned a coroutine: run it too
        left = None if limit is None else max(limit - (time.monotonic() - began), 0.0)
        return await invoke(
            _awaiting(result),
            (),
            is_async=True,
            executor=executor,
            timeout=None if left is None else timedelta(seconds=left),
        )
    return result


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
