"""``RabbitMqOptions``: the RabbitMQ backend's tunables, a small frozen value validated on
creation (options in a frozen value, not a constructor of many keywords). The checks go through
``queuey._validation``, so a bad value is a ``ConfigError`` naming ``RabbitMqOptions`` and the
option, shaped like every other option error."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from queuey._validation import Site, check_int, check_str

__all__ = ["QueueType", "RabbitMqOptions"]

QueueType = Literal["classic", "quorum"]
"""The kind of broker queue every queue of a backend is declared as."""


_SITE = Site("RabbitMqOptions")
_MAX_LIMIT = 2**31 - 1  # x-delivery-limit is a signed 32-bit integer on the wire
_DURATIONS = (
    "hold_granularity",
    "heartbeat",
    "connect_timeout",
    "reconnect_initial",
    "reconnect_max",
    "publish_timeout",
)


@dataclass(frozen=True)
class RabbitMqOptions:
    """How the RabbitMQ backend connects, holds and reconnects.

    Attributes:
        hold_granularity: delays (retries, ``enqueue_after``, deferrals) are rounded up to a
            whole number of these, so a few hold queues serve many delays (default 1 s; whole
            milliseconds, at least 1 ms).
        heartbeat: the AMQP heartbeat the client asks for (default 60 s; whole seconds). A dead
            peer is noticed within about two of these. Sync handlers run in threads, so a long
            one never starves the heartbeat.
        connect_timeout: how long one connection attempt may take (default 10 s).
        reconnect_initial: the first wait before reconnecting after the connection is lost
            (default 0.2 s); it doubles after each failed attempt.
        reconnect_max: the longest wait between reconnection attempts (default 5 s).
        publish_timeout: how long a publish may wait for the connection to come back and for
            the broker's confirm before it fails with ``BackendError`` (default 30 s).
        connection_name: shown by ``rabbitmqctl list_connections client_properties`` and the
            management UI (default ``"queuey"``).
        queue_type: ``"classic"`` (the default) or ``"quorum"``: every queue this backend
            declares (main, ``.dead`` and hold queues) is then a replicated quorum queue,
            dead-lettering at least once (``x-dead-letter-strategy=at-least-once``,
            ``x-overflow=reject-publish``). Quorum queues of RabbitMQ 3.10 have no priorities
            and are always durable: a queue with ``max_priority`` > 0 or ``durable=False`` is
            refused at ``declare`` (``ConfigError``). An existing queue cannot change its type.
        max_redeliveries: on quorum queues, the deliveries a job may lose (its worker's
            channel or connection died, or a graceful shutdown handed it back) before the
            broker moves it to ``q.dead`` instead of delivering it again
            (``x-delivery-limit``; default 5, at least 1). Classic queues count nothing: a job
            whose handler keeps killing its process is delivered again forever.

    Raises:
        ConfigError: a duration is zero or negative, ``hold_granularity`` is not a whole
            number of milliseconds, ``reconnect_max`` < ``reconnect_initial``,
            ``connection_name`` is not a string, ``queue_type`` is neither ``"classic"`` nor
            ``"quorum"``, or ``max_redeliveries`` is not an integer >= 1.
    """

    hold_granularity: timedelta = timedelta(seconds=1)
    heartbeat: timedelta = timedelta(seconds=60)
    connect_timeout: timedelta = timedelta(seconds=10)
    reconnect_initial: timedelta = timedelta(seconds=0.2)
    reconnect_max: timedelta = timedelta(seconds=5)
    publish_timeout: timedelta = timedelta(seconds=30)
    connection_name: str = "queuey"
    queue_type: QueueType = "classic"
    max_redeliveries: int = 5

    def __post_init__(self) -> None:
        for name in _DURATIONS:
            _check_positive(getattr(self, name), name)
        if self.hold_granularity % timedelta(milliseconds=1):
            raise _SITE.error(
                "hold_granularity", f"must be whole milliseconds, got {self.hold_granularity!r}"
            )
        if self.reconnect_max < self.reconnect_initial:
            raise _SITE.error(
                "reconnect_max",
                f"must be >= reconnect_initial ({self.reconnect_initial!r}), "
                f"got {self.reconnect_max!r}",
            )
        check_str(self.connection_name, "connection_name", site=_SITE)
        if self.queue_type not in ("classic", "quorum"):
            raise _SITE.error(
                "queue_type", f'must be "classic" or "quorum", got {self.queue_type!r}'
            )
        check_int(self.max_redeliveries, "max_redeliveries", low=1, high=_MAX_LIMIT, site=_SITE)

    @property
    def quorum(self) -> bool:
        """Whether the queues are quorum queues."""
        return self.queue_type == "quorum"


def _check_positive(value: object, name: str) -> None:
    """Refuse anything but a positive ``timedelta`` for option ``name``.

    Raises:
        ConfigError: naming ``RabbitMqOptions``, ``name`` and the value.
    """
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise _SITE.error(name, f"must be a positive timedelta, got {value!r}")
