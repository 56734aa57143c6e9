"""The types of handler registration that ``mypy --strict`` checks: for a job that declares a
result type (``Job[Set, Result]``), ``@worker.handler(JobClass)`` accepts only a handler
returning that type (an ``async def`` returning it, a plain ``def`` returning it, or an object
whose ``handle`` does); for a job without one, any handler (its return value is ignored).

A class registered as a handler (instantiated with no arguments) is not checked statically;
every handler's return value is validated at run time (a wrong one fails the attempt, naming
the field).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload

__all__ = ["Returning", "ReturningHandler"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
C = TypeVar("C", bound=type[Any])
P = ParamSpec("P")


class ReturningHandler(Protocol[T_co]):
    """An object whose ``handle`` returns ``T_co`` (or an awaitable of it)."""

    def handle(self, *args: Any, **kwargs: Any) -> Awaitable[T_co] | T_co:
        """Handle one job."""
        ...


class Returning(Generic[T]):
    """The decorator ``Worker.handler`` returns for a job whose result type is ``T``: it
    registers its target with ``register`` and returns it unchanged."""

    def __init__(self, register: Callable[[object], None]) -> None:
        self._register = register

    @overload
    def __call__(self, target: C) -> C: ...

    @overload
    def __call__(
        self, target: Callable[P, Coroutine[Any, Any, T]]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    @overload
    def __call__(self, target: Callable[P, T]) -> Callable[P, T]: ...

    @overload
    def __call__(self, target: ReturningHandler[T]) -> ReturningHandler[T]: ...

    def __call__(self, target: Any) -> Any:
        self._register(target)
        return target
