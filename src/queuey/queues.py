"""Queue sets: queues declared as attributes of a ``QueueSet`` subclass, validated when the class
is created.

```python
class AppQueues(QueueSet, prefix="myapp"):
    emails = Queue(prefetch=10)                  # "myapp.emails"
    image_resize = Queue(name="img")             # "myapp.img"
```

Defaults and limits: prefetch 16 (1..65535; 0 means
unlimited in AMQP and is refused), durable, no message TTL, ``max_priority`` 10 (0..255, 0 = not a
priority queue), no retry policy (the first failure dead-letters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Never

from queuey._validation import Site, check_bool, check_int, check_str, shown
from queuey.durations import Duration, parse_duration
from queuey.envelope import Kind
from queuey.errors import ConfigError
from queuey.limits import FlowLimit, LimitSpec, resolve_limits
from queuey.retry import RetryPolicy

__all__ = ["DEFAULT_MAX_PRIORITY", "Queue", "QueueConfig", "QueueSet", "snake_case"]

DEFAULT_MAX_PRIORITY = 10
"""A queue's top priority level when ``Queue(max_priority=...)`` is not given."""
_MAX_NAME_BYTES = 235  # room for RabbitMQ's longest derived name, <q>.hold.<ms>, in 255 bytes
_CAMEL_1 = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CAMEL_2 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    """``HTTPCalls`` → ``http_calls``, ``XMLHTTPRequest`` → ``xmlhttp_request``."""
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
        kind: ``"job"`` for typed queues, ``"topic"`` when ``name`` is a topic.
        job_types: when set, a consumer of this queue is handed only these job types (for a
            topic: the subscribers this app declares), and leaves the rest to other consumers;
            ``None`` hands out everything. Honoured by the memory and PostgreSQL backends.
        limits: the flow limits of the queue and of its job types (``queuey.limits``): rows
            are claimed only while every limit that applies to them has room.
        app: the topic app (its ``[queues] prefix``) a topic queue belongs to: pausing the
            app pauses the queue; ``None`` for a job queue.
        priority_aging: seconds a due row waits per priority level it gains when claims
            order rows (``None``: strict priority); see ``Queue``.
    """

    name: str
    prefetch: int = 16
    retry: RetryPolicy | None = None
    durable: bool = True
    message_ttl: timedelta | None = None
    max_priority: int = DEFAULT_MAX_PRIORITY
    kind: Kind = "job"
    job_types: tuple[str, ...] | None = None
    limits: tuple[LimitSpec, ...] = ()
    app: str | None = None
    priority_aging: float | None = None

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
        limits: flow limits of the whole queue (``Concurrency``, ``RateLimit``; a job
            class declares its own with its ``limits=`` keyword).
        priority_aging: a duration (``"10s"``): a due job gains one priority level per this
            much waiting, up to ``max_priority``, so a steady stream of high-priority jobs
            cannot starve a low one: a job of priority ``p`` starts at most
            ``(max_priority - p) * priority_aging`` after it fell due, plus the time the
            top-priority jobs due before it take. ``None`` (default): strict priority. Needs
            ``max_priority`` > 0; on a queue with flow limits the limits' order is kept (rows
            are considered by strict priority).

    Options are validated when the enclosing ``QueueSet`` class is created; an unknown option,
    a value of the wrong type (``durable="no"``, ``prefetch=1.5``) or out of range, an invalid
    retry policy, or one ``Queue`` object given to two attributes raises ``ConfigError``
    naming the set and the attribute (``AppQueues.emails: durable: ...``).
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
        limits: list[FlowLimit] | tuple[FlowLimit, ...] = (),
        priority_aging: Duration | None = None,
        **unknown: Never,
    ) -> None:
        self._options: dict[str, Any] = {
            "name": name,
            "prefetch": prefetch,
            "retry": retry,
            "durable": durable,
            "message_ttl": message_ttl,
            "max_priority": max_priority,
            "limits": limits,
            "priority_aging": priority_aging,
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

    def _resolve(self, owner: type[QueueSet], attribute: str, prefix: str | None) -> QueueConfig:
        """This queue's configuration as attribute ``attribute`` of ``owner``.

        Raises:
            ConfigError: naming ``owner.attribute``, for any bad option, or when this object
                is already an attribute of a set (this one or another).
        """
        site = Site.declaration(f"{owner.__name__}.{attribute}")
        if self.queue_set is not None:
            raise site.about(
                f"this Queue() is already {self.queue_set.__name__}.{self.attribute}; "
                "declare a new Queue() for each attribute"
            )
        if self._unknown:
            raise site.error(", ".join(self._unknown), "unknown queue option(s)")
        return _resolve(site, attribute, prefix, self._options)

    def _bind(self, owner: type[QueueSet], attribute: str, config: QueueConfig) -> None:
        self.attribute, self.queue_set, self._config = attribute, owner, config


def _resolve(site: Site, attribute: str, prefix: str | None, opts: dict[str, Any]) -> QueueConfig:
    base = opts["name"] if opts["name"] is not None else snake_case(attribute)
    check_str(base, "name", non_empty=True, site=site)
    name = f"{prefix}.{base}" if prefix else base
    if len(name.encode()) > _MAX_NAME_BYTES:
        raise site.error("name", f"{name!r} is longer than {_MAX_NAME_BYTES} bytes")
    retry = opts["retry"]
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise site.error("retry", f"expected a RetryPolicy, got {shown(retry)}")
    ttl, aging = opts["message_ttl"], opts["priority_aging"]
    top = check_int(opts["max_priority"], "max_priority", low=0, high=255, site=site)
    if aging is not None:
        aging = parse_duration(aging, site.name("priority_aging")).total_seconds()
        if top == 0:
            raise site.error("priority_aging", "needs a priority queue (max_priority > 0)")
    return QueueConfig(
        name=name,
        prefetch=check_int(opts["prefetch"], "prefetch", low=1, high=65535, site=site),
        retry=None if retry is None else retry.check(site),
        durable=check_bool(opts["durable"], "durable", site=site),
        message_ttl=None if ttl is None else parse_duration(ttl, site.name("message_ttl")),
        max_priority=top,
        limits=resolve_limits(site, opts["limits"]),
        priority_aging=aging,
    )


class QueueSet:
    """Base of an application's queue declarations; subclass it with ``Queue`` attributes.

    Class keyword ``prefix`` qualifies every name (``prefix="myapp"`` → ``"myapp.emails"``).

    Raises:
        ConfigError: at class creation, for an empty prefix, an empty or duplicate resolved
            name, a bad option value or retry policy, a ``Queue`` object given to two
            attributes (of this set or of two sets), or a set with no queue.
    """

    __queues__: ClassVar[tuple[Queue, ...]] = ()
    __prefix__: ClassVar[str | None] = None

    def __init_subclass__(cls, prefix: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if prefix is not None:
            check_str(prefix, "prefix", non_empty=True, site=Site.declaration(cls.__name__))
        cls.__prefix__ = prefix
        declared = [(a, v) for a, v in vars(cls).items() if isinstance(v, Queue)]
        if not declared:
            raise ConfigError(f"{cls.__name__}: a QueueSet needs at least one Queue attribute")
        configs: dict[str, QueueConfig] = {}
        seen: dict[str, str] = {}
        for attribute, queue in declared:
            first = next(a for a, other in declared if other is queue)
            if first != attribute:
                raise Site.declaration(f"{cls.__name__}.{attribute}").about(
                    f"this Queue() is already {cls.__name__}.{first}; "
                    "declare a new Queue() for each attribute"
                )
            config = queue._resolve(cls, attribute, prefix)
            if config.name in seen:
                raise ConfigError(
                    f"{cls.__name__}.{attribute}: queue name {config.name!r} is already used by "
                    f"{cls.__name__}.{seen[config.name]}"
                )
            seen[config.name] = attribute
            configs[attribute] = config
        for attribute, queue in declared:  # only once every queue of the set is valid
            queue._bind(cls, attribute, configs[attribute])
        cls.__queues__ = tuple(queue for _, queue in declared)

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
