"""``App``: an app's topics, that is its ``[queues]`` settings and its subscriber functions.

```python
app = App.load("app.toml")          # [queues], [functions] and [database] of the file

@app.function                       # registered as "send_welcome"
async def send_welcome(payload, context): ...

@app.function("notify_ops")         # registered under another name
def page_someone(payload): ...      # plain functions run in a thread pool

publication = await app.publisher(backend).publish("user.signed_up", {"id": 7})
await app.subscriber(backend).run()
```
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar, overload

from queuey.backends.base import Backend
from queuey.durations import Duration
from queuey.errors import ConfigError
from queuey.topics.appfile import AppConfig, load_app_config
from queuey.topics.config import QueuesConfig
from queuey.topics.function import Function, import_function, make_function
from queuey.topics.publisher import TopicPublisher
from queuey.topics.subscriber import Subscriber

__all__ = ["App"]

F = TypeVar("F", bound=Callable[..., Any])


class App:
    """An app's topics and functions. Constructing one does no I/O.

    Args:
        config: the ``[queues]`` settings (default: ``QueuesConfig()``, nothing subscribed).
        app_config: the file the settings came from, when loaded with ``App.load``.
    """

    def __init__(
        self, config: QueuesConfig | None = None, *, app_config: AppConfig | None = None
    ) -> None:
        self.config = config or (app_config.queues if app_config else QueuesConfig())
        self.app_config = app_config
        self._functions: dict[str, Function] = {}

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> App:
        """An app from its TOML file, with the ``[functions]`` it names imported (relative to
        the file's folder, then ``sys.path``).

        Raises:
            ConfigError: the file is unreadable or invalid, or a function cannot be imported;
                the message names the file and the key.
        """
        app_config = load_app_config(path)
        app = cls(app_config.queues, app_config=app_config)
        for name, target in app_config.functions.items():
            try:
                app.register(name, import_function(target, app_config.folder))
            except (ConfigError, TypeError) as exc:
                raise ConfigError(f"{app_config.path}: functions.{name}: {exc}") from None
        return app

    @property
    def functions(self) -> Mapping[str, Function]:
        """The registered functions by name (read-only)."""
        return MappingProxyType(self._functions)

    @property
    def database_url(self) -> str | None:
        """``[database] url`` of the app file, if it was loaded from one."""
        return self.app_config.database_url if self.app_config else None

    @overload
    def function(self, target: F, /) -> F: ...

    @overload
    def function(
        self, target: str | None = None, /, *, name: str | None = None
    ) -> Callable[[F], F]: ...

    def function(
        self, target: F | str | None = None, /, *, name: str | None = None
    ) -> F | Callable[[F], F]:
        """Register a function: ``@app.function``, ``@app.function("name")`` or
        ``@app.function(name="name")``. The default name is the function's ``__name__``.

        Raises:
            ConfigError: the name is taken by another function.
            TypeError: the target is not callable or takes no positional parameter.
        """
        if callable(target):
            self.register(name or _name_of(target), target)
            return target
        chosen = target if isinstance(target, str) else name

        def register(fn: F) -> F:
            self.register(chosen or _name_of(fn), fn)
            return fn

        return register

    def register(self, name: str, target: Callable[..., Any]) -> None:
        """Register ``target`` as the function ``name``. Registering the same callable under
        the same name again does nothing.

        Raises:
            ConfigError: ``name`` is empty, or taken by another callable.
            TypeError: ``target`` is not callable or takes no positional parameter.
        """
        function = make_function(name, target)
        existing = self._functions.get(function.name)
        if existing is not None and existing.call is not target:
            raise ConfigError(f"function `{function.name}` is registered twice")
        self._functions[function.name] = function

    def include(self, other: App) -> None:
        """Register every function of ``other`` here too (``queuey run --app``).

        Raises:
            ConfigError: a name is taken here by another callable.
        """
        for function in other.functions.values():
            self.register(function.name, function.call)

    def publisher(self, backend: Backend, *, tracing: object = False) -> TopicPublisher:
        """A publisher for this app's topics on ``backend`` (``tracing``: as for
        ``TopicPublisher``)."""
        return TopicPublisher(self.config, backend, tracing=tracing)

    def subscriber(
        self,
        backend: Backend,
        *,
        concurrency: int | None = None,
        shutdown_grace: Duration | None = None,
        paused: bool | None = None,
    ) -> Subscriber:
        """A subscriber running this app's functions on ``backend`` (see ``Subscriber``)."""
        return Subscriber(
            self.config,
            self.functions,
            backend,
            concurrency=concurrency,
            shutdown_grace=shutdown_grace,
            paused=paused,
        )


def _name_of(target: Callable[..., Any]) -> str:
    name = getattr(target, "__name__", None)
    if not isinstance(name, str):
        raise TypeError(f"{target!r} has no __name__; give the function a name")
    return name
