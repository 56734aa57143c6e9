"""``TopicSchedule``: a topic published periodically, from ``[queues.schedule]`` of an app file.

```toml
[queues.schedule]
"report.nightly" = { cron = "0 3 * * *", tz = "Europe/Paris", payload = { kind = "daily" } }
"cache.refresh"  = { every = "10m" }
```

The key is the topic; the value a table with ``cron`` or ``every`` (a duration string or
seconds), and optionally ``tz`` (default "UTC"), ``payload`` (any JSON value, default ``{}``),
``catch_up`` ("latest", "none", "all") and ``catch_up_limit``. Each slot is published with the
idempotency key (schedule, slot) by every ``queuey run`` of the app: once per slot.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from queuey._validation import Site, shown
from queuey.schedule import CatchUp, Periodic

__all__ = ["TopicSchedule", "parse_schedules"]

_KEYS = frozenset({"cron", "every", "tz", "payload", "catch_up", "catch_up_limit"})


class TopicSchedule(Periodic):
    """A topic and the payload published to it at each slot.

    Args:
        name: the schedule's name (``<prefix>:<topic>``).
        topic: the topic published to.
        payload: the JSON value published.
        site: where the options came from (for errors).
        options: ``cron``, ``every``, ``tz``, ``catch_up``, ``catch_up_limit`` as for
            ``Periodic``.

    Raises:
        ConfigError: a bad option, naming the key.
    """

    def __init__(self, name: str, topic: str, payload: Any, site: Site, **options: Any) -> None:
        super().__init__(name=name, site=site, **options)
        self.topic = topic
        self.payload = payload


def parse_schedules(
    table: object, prefix: str, valid_topic: Any, topic_error: Any
) -> Mapping[str, TopicSchedule]:
    """The ``[queues.schedule]`` table as topic → ``TopicSchedule``.

    Raises:
        ConfigError: not a table, an invalid topic, an unknown key, or a bad value; the message
            names the key (``queues.schedule."topic".cron``).
    """
    if not isinstance(table, Mapping):
        raise Site.table("queues").error("schedule", f"expected a table, got {shown(table)}")
    schedules: dict[str, TopicSchedule] = {}
    for raw, entry in table.items():
        if not isinstance(raw, str) or not valid_topic(raw):
            raise Site.table("queues").error("schedule", topic_error(str(raw)))
        topic = raw.strip()
        site = Site.table(f'queues.schedule."{topic}"')
        schedules[topic] = _schedule(topic, entry, prefix, site)
    return MappingProxyType(schedules)


def _schedule(topic: str, entry: object, prefix: str, site: Site) -> TopicSchedule:
    if not isinstance(entry, Mapping):
        raise site.about(f"expected a table {{ cron = ... }}, got {shown(entry)}")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise site.error(unknown[0], f"not a schedule setting (known: {', '.join(sorted(_KEYS))})")
    options = {k: v for k, v in entry.items() if k in _KEYS - {"payload"}}
    payload = entry.get("payload", {})
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError):
        raise site.error("payload", f"expected a JSON value, got {shown(payload)}") from None
    catch_up: CatchUp = options.pop("catch_up", "latest")
    return TopicSchedule(f"{prefix}:{topic}", topic, payload, site, catch_up=catch_up, **options)
