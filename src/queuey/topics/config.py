"""``QueuesConfig``: the ``[queues]`` table of an app's TOML file.

```toml
[queues]
prefix = "myapp"            # NOTIFY channel "myapp_queue"
retry_backoff_secs = 10     # 10s, 20s, 40s, 80s, then failed

[queues.subscribe]
"user.signed_up" = "send_welcome"
"order.paid"     = ["fulfil_order", "notify_ops"]
```

Every value is checked when the config is built (through ``queuey._validation``): a wrong type
(a float or a bool for a number, anything but a bool for ``enabled``, anything but a string for
``prefix`` and ``publish``), an invalid topic key, a negative number, or a zero ``poll_secs``,
``batch``, ``lease_secs``, ``max_attempts``, ``max_redeliveries`` or ``publish_timeout_secs``
is a ``ConfigError``
naming the key, e.g. ``queues.batch: expected an integer in 1..65535, got 0``
(``retry_backoff_secs = 0`` and ``retain_hours = 0`` are valid).
The ``publish`` access string is kept as written: the HTTP endpoint parses it, and one that does
not parse closes the door there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from queuey._validation import Site, check_bool, check_int, check_str, shown
from queuey.limits import LimitSpec
from queuey.topics.limits import parse_subscriber_limits
from queuey.topics.schedule import TopicSchedule, parse_schedules

__all__ = ["MAX_TOPIC_CHARS", "QueuesConfig", "topic_error"]

MAX_TOPIC_CHARS = 200
_TOPIC = re.compile(rf"[A-Za-z0-9._:\-]{{1,{MAX_TOPIC_CHARS}}}")
_MAX_INT = 2**31 - 1  # far above any sane value; keeps timedelta and SQL intervals in range
_MAX_BATCH = 65535  # a consumer's prefetch limit (QueueConfig)
_CHANNEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")  # a PostgreSQL identifier (LISTEN)
_MAX_DELAY_SECS = 3600
_COUNTS = {
    # key: smallest allowed value, largest allowed value
    "poll_secs": (1, _MAX_INT),
    "batch": (1, _MAX_BATCH),
    "max_attempts": (1, _MAX_INT),
    "retry_backoff_secs": (0, _MAX_INT),
    "lease_secs": (1, _MAX_INT),
    "retain_hours": (0, _MAX_INT),
    "max_redeliveries": (1, _MAX_INT),
    "idempotency_hours": (1, _MAX_INT),
    "publish_timeout_secs": (1, _MAX_INT),
}
_SITE = Site.table("queues")


def topic_error(topic: str) -> str:
    """The message saying why ``topic`` is not a topic (for ``InvalidTopicError``)."""
    shown = topic if len(topic) <= 60 else topic[:57] + "..."
    return (
        f"{shown!r} is not a topic: use 1 to {MAX_TOPIC_CHARS} characters, each a letter, "
        "a digit, `.`, `_`, `-` or `:`"
    )


@dataclass(frozen=True)
class QueuesConfig:
    """The ``[queues]`` settings of an app; defaults as listed, with prefix ``"queuey"``.

    Attributes:
        enabled: handle messages; ``False`` pauses handling while publishing still records.
        prefix: names the NOTIFY channel (``channel()``), so apps sharing a database do not
            wake each other; the channel must be a PostgreSQL identifier.
        subscribe: topic → subscriber function names, in declared order. Given as one name or
            a list; topics and names are trimmed, empty names dropped, duplicates dropped
            (keeping the first), and a topic left with no name is not a subscription.
        poll_secs: seconds between sweeps regardless of notifications (>= 1).
        batch: most messages claimed at once per topic (1..65535).
        max_attempts: tries before a message is left failed; 1 means no retry (>= 1).
        retry_backoff_secs: base of the backoff in seconds; 0 retries at once.
        lease_secs: seconds a claimed message may be worked on before another subscriber may
            take it (>= 1).
        retain_hours: hours after which handled messages are deleted; 0 keeps them forever.
        max_redeliveries: leases a message may lose (its subscriber's process died while
            handling it) before it is left failed, so a message that keeps killing its
            process does not cycle forever (>= 1).
        publish: who may publish over HTTP (the access grammar); ``"private"``: nobody.
        idempotency_hours: how long an idempotency key is remembered (the HTTP
            ``Idempotency-Key`` header, ``publish(key=...)``): a reuse within it writes nothing
            and answers with the first publication (>= 1).
        schedule: topic → ``TopicSchedule`` (``[queues.schedule]``): published periodically
            by ``queuey run`` (every process of the app tries each slot; it is published once).
        jobs: who may read a job's state, progress and result over HTTP (``GET
            <base>/jobs/{id}``; the access grammar of ``publish``); ``"private"`` (the
            default): the route does not exist.
        publish_timeout_secs: seconds a publish (``queuey publish``, the HTTP endpoint, a
            schedule's slot) waits for the database before it fails saying the database is
            unreachable; the HTTP endpoint then answers 503 (>= 1; the backend's
            ``publish_timeout``).
        limits: subscriber → its flow limits (``[queues.limits]``, see ``topics.limits``):
            spellings such as ``"rate 14/1s"``, or ``LimitSpec`` (``job_type`` the subscriber).

    Raises:
        ConfigError: a value of the wrong type or out of range, or an invalid topic; the
            message names the key.
    """

    enabled: bool = True
    prefix: str = "queuey"
    subscribe: Mapping[str, Sequence[str]] = field(default_factory=dict, hash=False)
    poll_secs: int = 30
    batch: int = 10
    max_attempts: int = 5
    retry_backoff_secs: int = 10
    lease_secs: int = 300
    retain_hours: int = 24
    publish: str = "private"
    max_redeliveries: int = 5
    idempotency_hours: int = 24
    schedule: Mapping[str, TopicSchedule] = field(default_factory=dict, hash=False)
    publish_timeout_secs: int = 5
    jobs: str = "private"
    limits: Mapping[str, str | Sequence[str | LimitSpec]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        check_bool(self.enabled, "enabled", site=_SITE)
        check_str(self.prefix, "prefix", site=_SITE)
        check_str(self.publish, "publish", site=_SITE)
        check_str(self.jobs, "jobs", site=_SITE)
        for key, (low, high) in _COUNTS.items():
            check_int(getattr(self, key), key, low=low, high=high, site=_SITE)
        if not _CHANNEL.fullmatch(self.channel()):
            raise _SITE.error(
                "prefix",
                f"{self.prefix!r} makes the channel {self.channel()!r}, which is "
                "not a PostgreSQL identifier (ASCII letters, digits and _, not starting with a "
                "digit, at most 63 characters in all)",
            )
        object.__setattr__(self, "subscribe", _normalise_subscribe(self.subscribe))
        schedule = self.schedule
        if not isinstance(schedule, Mapping) or not all(
            isinstance(value, TopicSchedule) for value in schedule.values()
        ):
            parsed = parse_schedules(self.schedule, self.prefix, self.valid_topic, topic_error)
            object.__setattr__(self, "schedule", parsed)
        if not _parsed_limits(self.limits):
            names = self.subscribed_functions()
            object.__setattr__(self, "limits", parse_subscriber_limits(_SITE, self.limits, names))

    def channel(self) -> str:
        """The NOTIFY channel this app's publishers and subscribers meet on:
        ``<prefix>_queue`` with the prefix trimmed of spaces and ``_`` (``queuey_queue`` when
        nothing is left)."""
        prefix = self.prefix.strip().strip("_")
        return f"{prefix}_queue" if prefix else "queuey_queue"

    @staticmethod
    def valid_topic(topic: str) -> bool:
        """Whether ``topic`` (trimmed) is 1..200 characters, each an ASCII letter or digit or
        one of ``. _ - :``."""
        return isinstance(topic, str) and _TOPIC.fullmatch(topic.strip()) is not None

    def subscriber_limits(self, name: str) -> tuple[LimitSpec, ...]:
        """The flow limits of subscriber ``name`` (``[queues.limits]``; empty if none)."""
        specs = self.limits.get(name, ())
        return tuple(spec for spec in specs if isinstance(spec, LimitSpec))

    def topics(self) -> tuple[str, ...]:
        """The subscribed topics, in declared order."""
        return tuple(self.subscribe)

    def subscribers(self, topic: str) -> tuple[str, ...]:
        """The functions subscribed to ``topic`` (trimmed), in declared order; empty if none."""
        return tuple(self.subscribe.get(topic.strip(), ()))

    def subscribed_functions(self) -> tuple[str, ...]:
        """Every function name any topic points at, once each, sorted (so a start-up report
        of missing functions reads the same every time)."""
        return tuple(sorted({name for names in self.subscribe.values() for name in names}))

    def is_active(self) -> bool:
        """Whether a subscriber loop should handle messages: enabled and something subscribed.
        Publishing does not depend on this."""
        return self.enabled and bool(self.subscribe)

    def publish_access(self) -> str:
        """The access string for the HTTP publish endpoint, trimmed and otherwise as written.

        Parse it with ``queuey.http.AccessPolicy.parse`` (an unparseable string, or
        ``owner``, closes the door). This returns the text, not a parsed policy, so that the
        topic layer needs nothing of the ``http`` extra; the endpoint and the dashboard parse it
        once at start-up and log a warning naming a value that closed the door.
        """
        return self.publish.strip()

    def jobs_access(self) -> str:
        """The access string of ``GET <base>/jobs/{id}`` (as ``publish_access``)."""
        return self.jobs.strip()

    def retry_delay_secs(self, attempts: int) -> int:
        """Seconds to wait after a message failed ``attempts`` times:
        ``retry_backoff_secs * 2 ** (attempts - 1)``, capped at 3600.

        ``attempts`` below 1 counts as 1; a huge one saturates to the cap (never overflows).
        """
        shift = max(attempts, 1) - 1
        factor: int = 2 ** min(shift, 64)
        return min(_MAX_DELAY_SECS, self.retry_backoff_secs * factor)


def _parsed_limits(limits: object) -> bool:
    """Whether ``limits`` is already subscriber → tuple of ``LimitSpec`` (a copy's)."""
    return isinstance(limits, Mapping) and all(
        isinstance(specs, tuple) and all(isinstance(spec, LimitSpec) for spec in specs)
        for specs in limits.values()
    )


def _names(topic: str, value: object) -> list[str]:
    key = f'subscribe."{topic}"'
    if isinstance(value, str):
        value = [value]
    if isinstance(value, Mapping) or not isinstance(value, Sequence):
        raise _SITE.error(key, f"expected a function name or a list of names, got {shown(value)}")
    names: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise _SITE.error(key, f"expected function names (strings), got {shown(item)}")
        if item.strip():
            names.append(item.strip())
    return names


def _normalise_subscribe(subscribe: object) -> Mapping[str, tuple[str, ...]]:
    if not isinstance(subscribe, Mapping):
        raise _SITE.error("subscribe", f"expected a table of topic = names, got {shown(subscribe)}")
    merged: dict[str, list[str]] = {}
    for raw_topic, value in subscribe.items():
        if not isinstance(raw_topic, str) or not QueuesConfig.valid_topic(raw_topic):
            raise _SITE.error("subscribe", topic_error(str(raw_topic)))
        names = merged.setdefault(raw_topic.strip(), [])
        for name in _names(raw_topic, value):
            if name not in names:  # duplicates dropped, the first kept
                names.append(name)
    return MappingProxyType({topic: tuple(names) for topic, names in merged.items() if names})
