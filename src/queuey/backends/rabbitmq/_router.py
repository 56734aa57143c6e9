"""``Router``: where an envelope goes on the broker and getting it there, confirmed.

An envelope goes to its queue now, or to the hold queue of its delay (declared on demand), and
every publish waits for the broker's confirm. The router also remembers the queues this backend
declared: a delay needs the queue's durability (the hold queue copies it), and the queues are
declared again on every new connection (``restore``, run by the ``Link`` before anyone else may
use the connection). The backend publishes through it, and so do its consumers' deliveries
(retries, deferrals, dead letters), which never see the backend itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from aio_pika.abc import AbstractConnection, AbstractMessage

from queuey.backends.rabbitmq._connection import Link
from queuey.backends.rabbitmq._declaration import close_quietly, declare_queue
from queuey.backends.rabbitmq._errors import translated
from queuey.backends.rabbitmq._lifecycle import Lifecycle
from queuey.backends.rabbitmq._topology import (
    HOLD_INFIX,
    broker_name,
    dead_name,
    hold_arguments,
    hold_name,
    hold_ttl_ms,
)
from queuey.backends.rabbitmq._wire import envelope_message
from queuey.envelope import Envelope, Kind
from queuey.errors import UnknownQueueError
from queuey.queues import QueueConfig

__all__ = ["Hold", "Router"]


@dataclass(frozen=True)
class Hold:
    """A hold queue to (re)declare before publishing into it."""

    name: str
    base: str
    ttl_ms: int
    durable: bool


class Router:
    """Routes and publishes envelopes over ``link``, and keeps the declared queues.

    Args:
        link: the backend's connection.
        lifecycle: the backend's open/closed state; nothing is published unless open.
        hold_granularity: delays are rounded up to a whole number of these.
    """

    def __init__(self, link: Link, lifecycle: Lifecycle, hold_granularity: timedelta) -> None:
        self._link = link
        self._lifecycle = lifecycle
        self._granularity = hold_granularity
        self._declared: dict[tuple[Kind, str], QueueConfig] = {}
        self._holds: set[str] = set()

    # -- the declared queues ------------------------------------------------------------------

    def remember(self, config: QueueConfig) -> None:
        """Record ``config`` as declared (the first config of a name wins)."""
        self._declared.setdefault((config.kind, config.name), config)

    def knows(self, kind: Kind, name: str) -> bool:
        """Whether queue ``name`` of ``kind`` was declared through this router."""
        return (kind, name) in self._declared

    def holds_of(self, base: str) -> list[str]:
        """The hold queues declared for broker queue ``base``, sorted."""
        return sorted(h for h in self._holds if h.startswith(base + HOLD_INFIX))

    def queue_names(self) -> list[str]:
        """Every broker queue declared (main, ``.dead`` and hold queues), sorted."""
        names = set(self._holds)
        for kind, name in self._declared:
            base = broker_name(name, kind)
            names.update((base, dead_name(base)))
        return sorted(names)

    async def restore(self, connection: AbstractConnection) -> None:
        """Declare every remembered queue again on ``connection`` (a new one).

        Raises:
            BackendError: the broker refused a declaration or the channel did not open.
        """
        configs = list(self._declared.values())
        if not configs:
            return
        with translated("re-declaring queues after reconnecting"):
            channel = await connection.channel(publisher_confirms=False)
        try:
            for config in configs:
                await declare_queue(channel, config)
        finally:
            await close_quietly(channel)

    # -- routing and publishing ---------------------------------------------------------------

    def route(
        self, envelope: Envelope, delay: timedelta | None, config: QueueConfig | None = None
    ) -> tuple[str, Hold | None]:
        """Where ``envelope`` goes: its queue now, or the hold queue for ``delay``.

        Args:
            envelope: the envelope to send.
            delay: none or zero for now.
            config: the queue's configuration (default: the one remembered).

        Raises:
            UnknownQueueError: a delay, on a queue never declared here.
            ConfigError: the delay is longer than RabbitMQ can hold a message.
        """
        base = broker_name(envelope.queue, envelope.kind)
        if delay is None or delay <= timedelta(0):
            return base, None
        config = config or self._declared.get((envelope.kind, envelope.queue))
        if config is None:
            raise UnknownQueueError(envelope.queue)
        ttl = hold_ttl_ms(delay, self._granularity)
        name = hold_name(base, ttl)
        return name, Hold(name, base, ttl, config.durable)

    async def send(
        self, routing_key: str, message: AbstractMessage, hold: Hold | None = None
    ) -> None:
        """Declare ``hold`` if given, then publish ``message`` to ``routing_key`` and await
        the broker's confirm.

        Raises:
            BackendError: refused, unroutable, or the connection was lost.
            ShutDownError: the backend is closed.
        """
        self._lifecycle.check_open()
        if hold is not None:
            await self._declare_hold(hold)
        await self._link.publish(routing_key, message)

    async def publish(self, envelopes: Sequence[Envelope], delay: timedelta | None) -> None:
        """Route every envelope (validating a delay) before sending any, then publish them
        pipelined: every message goes out at once and the confirms are awaited together. A
        topic envelope with no subscriber (empty ``job_type``) is not sent.

        Raises:
            BackendError: the broker refused or could not route a message (those before it
                may be published).
            UnknownQueueError: a delay on a queue never declared here.
            ConfigError: a delay longer than RabbitMQ can hold.
            ShutDownError: the backend is closed.
        """
        self._lifecycle.check_open()
        plan = [
            (envelope, *self.route(envelope, delay))
            for envelope in envelopes
            if envelope.kind == "job" or envelope.job_type
        ]
        holds = {hold.name: hold for _, _, hold in plan if hold is not None}
        for hold in holds.values():
            await self._declare_hold(hold)
        if len(plan) == 1:
            await self._link.publish(plan[0][1], envelope_message(plan[0][0]))
            return
        results = await asyncio.gather(
            *(self._link.publish(key, envelope_message(envelope)) for envelope, key, _ in plan),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _declare_hold(self, hold: Hold) -> None:
        """Declare (again) the hold queue ``hold``; re-declaring renews its ``x-expires``."""
        channel = await self._link.declarer()
        with translated(f"declaring hold queue {hold.name!r}"):
            await channel.declare_queue(
                hold.name,
                durable=hold.durable,
                arguments=dict(hold_arguments(hold.base, hold.ttl_ms)),
            )
        self._holds.add(hold.name)
