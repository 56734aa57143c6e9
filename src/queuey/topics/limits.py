"""``[queues.limits]``: flow limits per subscriber of a topic app.

```toml
[queues.limits]
fulfil_order = ["rate 14/1s", "concurrency 3 by tenant"]   # a slow downstream
notify_ops   = "concurrency 1"
```

Each key is a subscriber (a function ``[queues.subscribe]`` names); each value one limit or a
list, spelt as ``queuey.limits.parse_limit`` reads them (``concurrency N``, ``rate N/PER``,
optionally ``burst B`` and ``by field,...``; the key's fields are read from the message's
payload). The limits hold the subscriber's messages of each topic it subscribes to, across every
process of the app (the claim enforces them, as for typed jobs); ``of JobType`` is not written
here: the subscriber is the job type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from queuey._validation import Site, shown
from queuey.errors import ConfigError
from queuey.limits import LimitSpec, parse_limit

__all__ = ["parse_subscriber_limits"]


def parse_subscriber_limits(
    site: Site, value: object, subscribers: Sequence[str]
) -> Mapping[str, tuple[LimitSpec, ...]]:
    """``[queues.limits]`` as limits per subscriber (each ``LimitSpec``'s ``job_type`` the
    subscriber's name).

    Args:
        site: the ``[queues]`` table (named in errors).
        value: the table as read.
        subscribers: the functions ``[queues.subscribe]`` names.

    Raises:
        ConfigError: naming ``queues.limits."<name>"``: not a table, a key that is not a
            subscriber, a value that is not a spelling or a list of them, a spelling that does
            not parse, or one naming a job type (``of ...``).
    """
    if not isinstance(value, Mapping):
        raise site.error("limits", f"expected a table of subscriber = limits, got {shown(value)}")
    parsed: dict[str, tuple[LimitSpec, ...]] = {}
    for name, spelt in value.items():
        key = f'limits."{name}"'
        if name not in subscribers:
            known = ", ".join(sorted(subscribers)) or "none"
            raise site.error(
                key, f"not a subscriber: [queues.subscribe] names no function {name!r} "
                f"(subscribers: {known})"
            )  # fmt: skip
        items = [spelt] if isinstance(spelt, str) else spelt
        if isinstance(items, Mapping) or not isinstance(items, Sequence) or not items:
            raise site.error(key, f"expected a limit or a list of limits, got {shown(spelt)}")
        parsed[name] = tuple(_one(site, key, name, item) for item in items)
    return MappingProxyType(parsed)


def _one(site: Site, key: str, name: str, item: object) -> LimitSpec:
    if not isinstance(item, str):
        raise site.error(key, f"expected a limit such as 'rate 14/1s', got {shown(item)}")
    try:
        spec = parse_limit(item)
    except ConfigError as exc:
        raise site.error(key, str(exc)) from None
    if spec.job_type is not None:
        raise site.error(
            key, f"{item!r}: leave out 'of {spec.job_type}': a subscriber's limits hold its own "
            "messages"
        )  # fmt: skip
    return LimitSpec(name, spec.by, spec.limit, spec.per, spec.burst)
