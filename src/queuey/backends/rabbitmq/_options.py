"""``RabbitMqOptions``: the RabbitMQ backend's tunables, a small frozen value validated on
creation (STYLE: options in a frozen value, not a god constructor). The checks go through
``queuey._validation``, so a bad value is a ``ConfigError`` naming ``RabbitMqOptions`` and the
option, shaped like every other option error."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from queuey._validation import Site, check_str

__all__ = ["RabbitMqOptions"]


_SITE = Site("RabbitMqOptions")
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

    Raises:
        ConfigError: a duration is zero or negative, ``hold_granularity`` is not a whole
            number of milliseconds, ``reconnect_max`` < ``reconnect_initial``, or
            ``connection_name`` is not a string.
    """

    hold_granularity: timedelta = timedelta(seconds=1)
    heartbeat: timedelta = timedelta(seconds=60)
    connect_timeout: timedelta = timedelta(seconds=10)
    reconnect_initial: timedelta = timedelta(seconds=0.2)
    reconnect_max: timedelta = timedelta(seconds=5)
    publish_timeout: timedelta = timedelta(seconds=30)
    connection_name: str = "queuey"

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


def _check_positive(value: object, name: str) -> None:
    """Refuse anything but a positive ``timedelta`` for option ``name``.

    Raises:
        ConfigError: naming ``RabbitMqOptions``, ``name`` and the value.
    """
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise _SITE.error(name, f"must be a positive timedelta, got {value!r}")
