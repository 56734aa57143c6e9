"""Handler registration: a function (async or plain), a class with ``handle`` (instantiated
with no arguments) or an object with ``handle``, bound to one job type.

A plain (``def``) handler runs in a thread pool, never on the event loop.
"""

from __future__ import annotations

import inspect
import pickle
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from queuey._runtime.invoke import is_coroutine_callable
from queuey.errors import ConfigError
from queuey.jobs import Job
from queuey.retry import RetryPolicy

__all__ = ["HandlerEntry", "make_entry", "portable", "takes_context"]


@dataclass(frozen=True)
class HandlerEntry:
    """A registered handler: the job class, the callable, whether it is a coroutine, the
    job's effective retry policy (resolved once, at registration), the validator of its
    declared result type (``None`` when it declares none), and whether it takes the context
    (``call(job, ctx)``; else ``call(job)``, and no ``JobContext`` is built for its runs)."""

    job_type: type[Job[Any, Any]]
    call: Callable[..., Any]
    is_async: bool
    name: str
    retry: RetryPolicy
    result: TypeAdapter[Any] | None = None
    takes_context: bool = True


def _callable_of(target: object) -> Callable[..., Any]:
    if inspect.isclass(target):
        target = target()
    handle = getattr(target, "handle", None)
    if handle is not None and callable(handle):
        return typing.cast(Callable[..., Any], handle)
    if callable(target):
        return target
    raise TypeError(f"{target!r} is neither a function nor an object with a `handle` method")


def _check_annotation(call: Callable[..., Any], job_type: type[Job[Any, Any]]) -> None:
    try:
        hints = typing.get_type_hints(call)
    except Exception:  # unresolvable forward references: nothing to check
        return
    params = [p for p in inspect.signature(call).parameters.values() if p.name != "self"]
    if not params:
        raise TypeError(f"handler {call!r} must take the job (and optionally the context)")
    annotated = hints.get(params[0].name)
    if annotated is not Any and isinstance(annotated, type) and not issubclass(job_type, annotated):
        raise TypeError(
            f"handler {getattr(call, '__qualname__', call)!r} takes {annotated.__qualname__}, "
            f"but is registered for {job_type.__qualname__}"
        )


def takes_context(call: Callable[..., Any]) -> bool:
    """Whether ``call`` takes a second positional argument (the context) besides the first."""
    params = inspect.signature(call).parameters.values()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def portable(entry: HandlerEntry) -> None:
    """Check that ``entry``'s plain handler can be sent to a handler process (pickled by
    reference: a function or class defined at module level, an instance that pickles).

    Raises:
        ConfigError: it cannot; the message names the handler and what to do.
    """
    if entry.is_async:
        return
    try:
        pickle.dumps(entry.call)
    except Exception as exc:
        raise ConfigError(
            f"handler {entry.name!r} of {entry.job_type.job_name()!r} cannot run in a process "
            f"(plain_handlers='process'): it must pickle, so define it at module level ({exc})"
        ) from None


def make_entry(job_type: type[Job[Any, Any]], target: object) -> HandlerEntry:
    """Wrap ``target`` as the handler of ``job_type``.

    Raises:
        TypeError: ``target`` is not callable, or its first parameter is annotated with a
            class that ``job_type`` is not.
    """
    call = _callable_of(target)
    _check_annotation(call, job_type)
    is_async = is_coroutine_callable(call)
    name = getattr(target, "__qualname__", type(target).__qualname__)
    retry = job_type.effective_retry()
    result = job_type.__queuey_result__
    return HandlerEntry(job_type, call, is_async, name, retry, result, takes_context(call))
