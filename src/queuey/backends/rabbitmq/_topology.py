"""Broker names and queue arguments for the RabbitMQ backend, as pure functions.

Per logical queue ``q`` (with a hold queue for every distinct delay):

=====================  =====================================================================
broker queue           arguments
=====================  =====================================================================
``q``                  durable per config; ``x-max-priority`` when ``max_priority`` > 0;
                       ``x-message-ttl`` (ms) when ``message_ttl`` is set; always
                       ``x-dead-letter-exchange`` ``""`` and ``x-dead-letter-routing-key``
                       ``q.dead``, so an expired (or rejected) message lands in ``q.dead``
                       instead of being dropped.
``q.dead``             none; always durable. Our dead letters carry ``x-death-reason``,
                       ``x-original-queue`` and ``x-attempts`` headers.
``q.hold.<ttl_ms>``    created on demand, one per distinct delay: ``x-message-ttl`` = ttl_ms,
                       dead-lettering back into ``q`` through the default exchange, and
                       ``x-expires`` = 2 · ttl_ms so an unused hold queue goes away. Durable
                       iff ``q`` is. Never ``x-max-priority`` (the message keeps its priority
                       and ``q`` orders it).
=====================  =====================================================================

With ``RabbitMqOptions(queue_type="quorum")`` (a ``Quorum`` here) every one of them is a quorum
queue (``x-queue-type`` ``quorum``): the main queue and the hold queues also take
``x-dead-letter-strategy`` ``at-least-once`` with ``x-overflow`` ``reject-publish`` (RabbitMQ
3.10: the broker keeps a dead letter until the target queue confirms it, so an expiry or a
rejection moves a message, never drops it when a node dies), and the main queue takes
``x-delivery-limit``: a message returned more times than that (its consumer's channel died
with it unsettled) goes to ``q.dead``. Quorum queues of 3.10 have no ``x-max-priority`` and are
always durable, so ``check_quorum`` refuses a queue that asks for either. A quorum hold queue
lives ``QUORUM_HOLD_GRACE_MS`` longer (``x-expires`` = 2 · ttl_ms + one minute, at most
``MAX_TTL_MS``): a quorum queue expires its messages on a timer of its Raft leader, which a busy
node runs late, and a hold queue deleted before it has moved its expired messages on would lose
them.

Hold queues serve retries, ``enqueue_after`` and deferrals alike, so a long delay never blocks
a short one (each queue holds messages of a single TTL, which therefore expire in order).
Delays are rounded up to the hold granularity (1 s by default) and refused above
``MAX_HOLD_MS`` (2147483647 ms, about 24.8 days: twice it must still fit RabbitMQ's 32-bit
``x-expires``); ``max_hold`` is the longest delay that rounds to no more. A queue's
``message_ttl`` is refused above ``MAX_TTL_MS`` (2^32 - 1 ms, about 49.7 days, the most
``x-message-ttl`` takes), and so is a retry policy that could wait longer than ``max_hold``
(``check_limits``, run by ``declare``): a duration RabbitMQ cannot hold is an error, never
silently shortened.

Topic queues (``kind="topic"``) are named ``queuey-topic.<topic>``, so a topic never shares a
broker queue with a typed queue of the same name (a typed queue name would need the explicit
prefix ``queuey-topic`` to collide).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from queuey.envelope import Kind
from queuey.errors import ConfigError
from queuey.queues import QueueConfig

__all__ = [
    "DEAD_SUFFIX",
    "HOLD_INFIX",
    "MAX_HOLD_MS",
    "MAX_NAME_BYTES",
    "MAX_TTL_MS",
    "QUORUM_HOLD_GRACE_MS",
    "TOPIC_PREFIX",
    "Quorum",
    "broker_name",
    "check_name",
    "check_quorum",
    "dead_arguments",
    "dead_name",
    "hold_arguments",
    "hold_name",
    "hold_ttl_ms",
    "check_limits",
    "main_arguments",
    "max_hold",
    "ttl_ms",
]

TOPIC_PREFIX = "queuey-topic."
DEAD_SUFFIX = ".dead"
HOLD_INFIX = ".hold."
MAX_HOLD_MS = 2_147_483_647
"""The longest hold, in milliseconds: ``x-expires`` (2 · TTL) must fit in 32 bits unsigned."""
MAX_TTL_MS = 4_294_967_295
"""The longest ``x-message-ttl`` RabbitMQ accepts, in milliseconds."""
QUORUM_HOLD_GRACE_MS = 60_000
"""How much longer than twice its TTL a quorum hold queue outlives its last declaration."""
MAX_NAME_BYTES = 255
"""AMQP's limit on a queue name (a short string), in bytes."""

Arguments = dict[str, int | str]


@dataclass(frozen=True)
class Quorum:
    """Declare quorum queues; a message returned more than ``delivery_limit`` times is
    dead-lettered (so it is delivered at most ``delivery_limit + 1`` times).

    Attributes:
        delivery_limit: ``x-delivery-limit`` of the main queues (>= 0).
    """

    delivery_limit: int


_AT_LEAST_ONCE: Arguments = {
    "x-queue-type": "quorum",
    "x-dead-letter-strategy": "at-least-once",
    "x-overflow": "reject-publish",
}


def broker_name(name: str, kind: Kind = "job") -> str:
    """The broker name of a logical queue: ``name`` itself, ``queuey-topic.<name>`` for topics."""
    return f"{TOPIC_PREFIX}{name}" if kind == "topic" else name


def dead_name(base: str) -> str:
    """The dead-letter queue of broker queue ``base``: ``<base>.dead``."""
    return f"{base}{DEAD_SUFFIX}"


def hold_name(base: str, ttl: int) -> str:
    """The hold queue of broker queue ``base`` for a TTL of ``ttl`` milliseconds."""
    return f"{base}{HOLD_INFIX}{ttl}"


def check_name(base: str) -> None:
    """Refuse a broker queue name whose longest derived name would not fit AMQP's 255 bytes.

    Raises:
        ConfigError: ``hold_name(base, MAX_HOLD_MS)`` is longer than 255 bytes (UTF-8).
    """
    longest = hold_name(base, MAX_HOLD_MS)
    if len(longest.encode()) > MAX_NAME_BYTES:
        raise ConfigError(
            f"queue {base!r}: its hold queue name {longest!r} would exceed RabbitMQ's "
            f"{MAX_NAME_BYTES}-byte limit; use a shorter name"
        )


def ttl_ms(duration: timedelta) -> int:
    """A positive duration as whole milliseconds, rounded up, at least 1.

    Raises:
        ConfigError: more than ``MAX_TTL_MS`` (about 49.7 days), which ``x-message-ttl``
            cannot hold.
    """
    exact = max(1, math.ceil(duration / timedelta(milliseconds=1)))
    if exact > MAX_TTL_MS:
        raise ConfigError(
            f"a message TTL of {duration} is longer than RabbitMQ's x-message-ttl can be "
            f"({MAX_TTL_MS} ms, about 49.7 days)"
        )
    return exact


def max_hold(granularity: timedelta) -> timedelta:
    """The longest delay a hold queue takes with this rounding step: ``MAX_HOLD_MS`` rounded
    down to a whole number of steps (about 24.8 days)."""
    step = max(1, math.ceil(granularity / timedelta(milliseconds=1)))
    return timedelta(milliseconds=(MAX_HOLD_MS // step) * step)


def check_limits(config: QueueConfig, longest_delay: timedelta) -> None:
    """Refuse a queue whose declared durations RabbitMQ cannot hold.

    Args:
        config: the queue.
        longest_delay: the longest delay a hold queue takes (``max_hold``).

    Raises:
        ConfigError: naming the queue: its ``message_ttl`` is over ``MAX_TTL_MS``, or its
            retry policy may wait longer than ``longest_delay``.
    """
    if config.message_ttl is not None:
        try:
            ttl_ms(config.message_ttl)
        except ConfigError as exc:
            raise ConfigError(f"queue {config.name!r}: message_ttl: {exc}") from None
    if config.retry is not None and config.retry.problem is None:
        longest = config.retry.longest_wait
        if longest > longest_delay:
            raise ConfigError(
                f"queue {config.name!r}: retry: waits up to {longest}, longer than RabbitMQ can "
                f"hold a message ({longest_delay}, about 24.8 days)"
            )


def hold_ttl_ms(delay: timedelta, granularity: timedelta) -> int:
    """The TTL of the hold queue serving ``delay``, in milliseconds.

    ``delay`` is rounded up to a whole number of ``granularity`` steps, at least one step:
    with 1 s, 30 s → 30000, 29.2 s → 30000, 5 ms → 1000.

    Args:
        delay: how long to hold a message (> 0).
        granularity: the rounding step (> 0, whole milliseconds).

    Returns:
        The TTL in milliseconds, 1..MAX_HOLD_MS.

    Raises:
        ConfigError: the rounded delay exceeds ``MAX_HOLD_MS`` (about 24.8 days); RabbitMQ
            cannot hold a message that long, and the delay is refused rather than shortened.
    """
    step = max(1, math.ceil(granularity / timedelta(milliseconds=1)))
    steps = max(1, math.ceil(delay / timedelta(milliseconds=step)))
    ttl = steps * step
    if ttl > MAX_HOLD_MS:
        raise ConfigError(
            f"a delay of {delay} is longer than RabbitMQ can hold a message "
            f"({MAX_HOLD_MS} ms, about 24.8 days)"
        )
    return ttl


def check_quorum(config: QueueConfig) -> None:
    """Refuse a queue that a quorum queue of RabbitMQ 3.10 cannot be.

    Raises:
        ConfigError: naming the queue: it has priorities (``max_priority`` > 0; quorum queues
            have none, and emulating them would take one replicated queue per level), or it is
            not durable (quorum queues always are).
    """
    if config.max_priority > 0:
        raise ConfigError(
            f"queue {config.name!r}: max_priority={config.max_priority}, but quorum queues of "
            "RabbitMQ 3.10 have no priorities (queuey does not emulate them: that would take "
            "one replicated queue per level); declare it with Queue(max_priority=0), or keep "
            'queue_type="classic"'
        )
    if not config.durable:
        raise ConfigError(
            f"queue {config.name!r}: durable=False, but a quorum queue is always durable; "
            'declare it with durable=True, or keep queue_type="classic"'
        )


def main_arguments(config: QueueConfig, quorum: Quorum | None = None) -> Arguments:
    """The ``x-`` arguments of the main queue of ``config`` (see the module table); quorum
    queue arguments when ``quorum`` is given (``check_quorum`` first)."""
    base = broker_name(config.name, config.kind)
    arguments: Arguments = {
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": dead_name(base),
    }
    if quorum is not None:
        arguments.update(_AT_LEAST_ONCE)
        arguments["x-delivery-limit"] = quorum.delivery_limit
    elif config.max_priority > 0:
        arguments["x-max-priority"] = config.max_priority
    if config.message_ttl is not None:
        arguments["x-message-ttl"] = ttl_ms(config.message_ttl)
    return arguments


def dead_arguments(quorum: Quorum | None = None) -> Arguments:
    """The ``x-`` arguments of a dead-letter queue: none, or the quorum queue type."""
    return {} if quorum is None else {"x-queue-type": "quorum"}


def hold_arguments(base: str, ttl: int, quorum: Quorum | None = None) -> Arguments:
    """The ``x-`` arguments of the hold queue of ``base`` for ``ttl`` milliseconds."""
    arguments: Arguments = {
        "x-message-ttl": ttl,
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": base,
        "x-expires": 2 * ttl,
    }
    if quorum is not None:
        arguments.update(_AT_LEAST_ONCE)
        arguments["x-expires"] = min(MAX_TTL_MS, 2 * ttl + QUORUM_HOLD_GRACE_MS)
    return arguments
