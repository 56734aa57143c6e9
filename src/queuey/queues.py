"""Queue sets: queues declared as attributes of a ``QueueSet`` subclass, validated when the class
is created.

```python
class AppQueues(QueueSet, prefix="myapp"):
    emails = Queue(prefetch=10)                  # "myapp.emails"
    image_resize = Queue(name="img")             # "myapp.img"
```

Defaults and limits are seed ``001``'s (SEEDS-DIGEST §2.3): prefetch 16 (1..65535; 0 means
unlimited in AMQP and is refused), durable, no message TTL, ``max_priority`` 10 (0..255, 0 = not a
priority queue), no retry policy (the first failure dead-letters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Never

from queuey.durations import Duration, parse_duration
from queuey.envelope import Kind
from queuey.errors import ConfigError
from queuey.retry import RetryPolicy

__all__ = ["DEFAULT_MAX_PRIORITY", "Queue", "QueueConfig", "QueueSet", "snake_case"]

DEFAULT_MAX_PRIORITY = 10
_MAX_NAME_BYTES = 235  # leaves room for RabbitMQ's longest derived name (SEEDS-DIGEST §2.9)
_CAMEL_1 = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CAMEL_2 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    """``HTTPCalls`` → ``http_calls``, ``XMLHTTPRequest`` → ``xmlhttp_request`` (seed rule)."""
    return _CAMEL_2.sub("_", _CAMEL_1.sub("_", name)).lower()


@dataclass(frozen=True)
class QueueConfig:
    """The resolved options of one queue, as backends see them.

    Attributes:
        name: the fully qualified name (prefix included), e.g. ``"myapp.emails"``.
        prefetch: deliveries a consumer may hold unsettled at once (1..65535).
        retry: the queue's retry policy, or ``None`` (first failure dead-letters).
        durable: whether the queue survives a broker restart (RabbitMQ).
        message_ttl: a job not started within this time is dead-lettered as "expired".
        max_priority: the top priority level; 0 means not a priority queue.
        kind: ``"job"`` for typed queues, ``"topic"`` when ``name`` is a topic (seed ``000``).
        job_types: when set, a consumer of this queue is handed only these job types (for a
            topic: the subscribers this app declares), and leaves the rest to other consumers;
            ``None`` hands out everything. Honoured by the memory and PostgreSQL backends.
    """

    name: str
    prefetch: int = 16
    retry: RetryPolicy | None = None
    durable: bool = True
    message_ttl: timedelta | None = None
    max_priority: int = DEFAULT_MAX_PRIORITY
    kind: Kind = "job"
    job_types: tuple[str, ...] | None = None

    @property
    def top_priority(self) -> int:
        """The priority a deferred job comes back with: ``max_priority`` (or 0)."""
        return self.max_priority


class Queue:
    """One queue of a ``QueueSet``, declared as a class attribute.

    Args:
        name: the name within the set; defaults to the attribute name in snake_case.
        prefetch: unsettled deliveries per consumer, 1..65535 (default 16).
        retry: the queue's ``RetryPolicy`` (a job's own policy beats it).
        durable: survive a broker restart (default true).
        message_ttl: dead-letter a job not started within this duration
            (a duration string, ``timedelta`` or seconds; not zero).
        max_priority: top priority level, 0..255 (default 10; 0 = not a priority queue).

    Options are validated when the enclosing ``QueueSet`` class is created; an unknown option
    or a bad value raises ``ConfigError`` naming the attribute.
    """

    def __init__(
        self,
        *,
        name: str | None = None,
        prefetch: int = 16,
        retry: RetryPolicy | None = None,
        durable: bool = True,
        message_ttl: Duration | None = None,
        max_priority: int = DEFAULT_MAX_PRIORITY,
        **unknown: Never,
    ) -> None:
        self._options: dict[str, Any] = {
            "name": name,
            "prefetch": prefetch,
            "retry": retry,
            "durable": durable,
            "message_ttl": message_ttl,
            "max_priority": max_priority,
        }
        self._unknown = sorted(unknown)
        self.attribute = ""
        self.queue_set: type[QueueSet] | None = None
        self._config: QueueConfig | None = None

    @property
    def config(self) -> QueueConfig:
        """The resolved configuration (available once the set's class exists)."""
        if self._config is None:
            raise ConfigError("this Queue is not an attribute of a QueueSet class")
        return self._config

    @property
    def name(self) -> str:
        """The fully qualified queue name, prefix included."""
        return self.config.name

    def __repr__(self) -> str:
        owner = self.queue_set.__name__ if self.queue_set else "?"
        return f"<Queue {owner}.{self.attribute} name={self._config.name if self._config else '?'}>"

    def _bind(self, owner: type[QueueSet], attribute: str, prefix: str | None) -> None:
        where = f"{owner.__name__}.{attribute}"
        if self._unknown:
            raise ConfigError(f"{where}: unknown queue option(s) {', '.join(self._unknown)}")
        self.attribute, self.queue_set = attribute, owner
        self._config = _resolve(where, attribute, prefix, self._options)


def _check_int(where: str, key: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{where}: {key} must be an integer in {low}..{high}, got {value!r}")
    return value


def _resolve(where: str, attribute: str, prefix: str | None, opts: dict[str, Any]) -> QueueConfig:
    base = opts["name"] if opts["name"] is not None else snake_case(attribute)
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"{where}: name must be a non-empty string, got {base!r}")
    name = f"{prefix}.{base}" if prefix else base
    if len(name.encode()) > _MAX_NAME_BYTES:
        raise ConfigError(f"{where}: name {name!r} is longer than {_MAX_NAME_BYTES} bytes")
    retry = opts["retry"]
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigError(f"{where}: retry must be a RetryPolicy, got {retry!r}")
    ttl = opts["message_ttl"]
    return QueueConfig(
        name=name,
        prefetch=_check_int(where, "prefetch", opts["prefetch"], 1, 65535),
        retry=retry,
        durable=bool(opts["durable"]),
        message_ttl=None if ttl is None else parse_duration(ttl, f"{where}: message_ttl"),
        max_priority=_check_int(where, "max_priority", opts["max_priority"], 0, 255),
    )


class QueueSet:
    """Base of an application's queue declarations; subclass it with ``Queue`` attributes.

    Class keyword ``prefix`` qualifies every name (``prefix="myapp"`` → ``"myapp.emails"``).

    Raises:
        ConfigError: at class creation, for an empty prefix, an empty or duplicate resolved
            name, a bad option value, or a set with no queue.
    """

    __queues__: ClassVar[tuple[Queue, ...]] = ()
    __prefix__: ClassVar[str | None] = None

    def __init_subclass__(cls, prefix: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if prefix is not None and (not isinstance(prefix, str) or not prefix.strip()):
            raise ConfigError(f"{cls.__name__}: prefix must be a non-empty string")
        cls.__prefix__ = prefix
        queues: list[Queue] = []
        seen: dict[str, str] = {}
        for attribute, value in vars(cls).items():
            if not isinstance(value, Queue):
                continue
            value._bind(cls, attribute, prefix)
            if value.name in seen:
                raise ConfigError(
                    f"{cls.__name__}.{attribute}: queue name {value.name!r} is already used by "
                    f"{cls.__name__}.{seen[value.name]}"
                )
            seen[value.name] = attribute
            queues.append(value)
        if not queues:
            raise ConfigError(f"{cls.__name__}: a QueueSet needs at least one Queue attribute")
        cls.__queues__ = tuple(queues)

    @classmethod
    def all(cls) -> tuple[Queue, ...]:
        """The set's queues in declaration order."""
        return cls.__queues__

    @classmethod
    def by_name(cls, name: str) -> Queue:
        """The queue whose fully qualified name is ``name``.

        Raises:
            KeyError: no queue of this set has that name.
        """
        for queue in cls.__queues__:
            if queue.name == name:
                return queue
        raise KeyError(name)
