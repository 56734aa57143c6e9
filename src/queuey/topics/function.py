"""Subscriber functions: plain Python callables registered by name, and the ``MessageContext``
they may take.

A function is called with ``(payload, context)``, or with the payload alone when it takes one
positional parameter. A coroutine function runs on the event loop; a plain one runs in the
subscriber's thread pool, never on the loop.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from queuey._run_scope import RunControls, RunScope
from queuey._runtime.handlers import takes_context
from queuey._runtime.invoke import is_coroutine_callable
from queuey.errors import ConfigError

__all__ = ["Function", "MessageContext", "import_function", "make_function"]


@dataclass(frozen=True)
class MessageContext(RunControls):
    """Why a function is running: the message it was handed; and, as for a typed job,
    ``cancelled`` / ``await cancellation()`` and ``transaction()`` (PostgreSQL: commit the
    function's writes and the message's completion together).

    Attributes:
        topic: the topic the message was published to.
        message_id: the message's id (a UUID string), stable across retries.
        subscriber: the name of the function handling it.
        attempts: 1-based run number (1 on the first try).
        published_by: who published it (a principal id, or ``""``).
        run_scope: the run's controls (set by the subscriber; ``None`` when built by hand).
    """

    topic: str
    message_id: str
    subscriber: str
    attempts: int
    published_by: str
    run_scope: RunScope | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Function:
    """A registered subscriber function.

    Attributes:
        name: the name subscriptions use.
        call: the callable.
        is_async: ``call`` is a coroutine function (runs on the loop, not in a thread).
        takes_context: ``call`` takes ``(payload, context)`` rather than ``(payload)``.
    """

    name: str
    call: Callable[..., Any]
    is_async: bool
    takes_context: bool

    def arguments(self, payload: Any, context: MessageContext) -> tuple[Any, ...]:
        """The positional arguments for one call."""
        return (payload, context) if self.takes_context else (payload,)


def make_function(name: str, target: object) -> Function:
    """Wrap ``target`` as the function called ``name``.

    Raises:
        ConfigError: ``name`` is empty.
        TypeError: ``target`` is not callable, or takes no positional parameter.
    """
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"function name must be a non-empty string, got {name!r}")
    if not callable(target):
        raise TypeError(f"function `{name}`: {target!r} is not callable")
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # some builtins have none: assume payload only
        return Function(name.strip(), target, False, False)
    if not _takes_payload(signature):
        raise TypeError(f"function `{name}` must take the payload (and optionally a context)")
    return Function(name.strip(), target, is_coroutine_callable(target), takes_context(target))


def _takes_payload(signature: inspect.Signature) -> bool:
    kinds = {p.kind for p in signature.parameters.values()}
    positional = {inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD}
    return bool(kinds & (positional | {inspect.Parameter.VAR_POSITIONAL}))


def import_function(path: str, folder: Path | None = None) -> Callable[..., Any]:
    """Import ``"module:attribute"`` (the attribute may be dotted), looking in ``folder`` first
    and then ``sys.path``.

    Args:
        path: the import path.
        folder: the folder of the file that named it (put at the front of ``sys.path``).

    Raises:
        ConfigError: the module cannot be imported (or raised while importing), the attribute
            is missing, or it is not callable.
    """
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{path!r} is not an import path of the form module:attribute")
    if folder is not None and str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # an import error or anything the module raised
        raise ConfigError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ConfigError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not callable(target):
        raise ConfigError(f"{path!r} is not callable")
    return target  # type: ignore[no-any-return]
