"""``RabbitMqBackend``: the ``Backend`` contract on RabbitMQ 3.10+ classic queues (DESIGN §5).

Topology and names are in ``_topology``, the wire format in ``_wire``, the connection and its
reconnection in ``_connection``, consumers and deliveries in ``_consumer``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import Self

from aio_pika.abc import AbstractConnection, AbstractMessage

from queuey.backends.rabbitmq import _topology as topology
from queuey.backends.rabbitmq._connection import Link
from queuey.backends.rabbitmq._consumer import RabbitMqConsumer
from queuey.backends.rabbitmq._declaration import close_quietly, declare_queue
from queuey.backends.rabbitmq._errors import translated
from queuey.backends.rabbitmq._inspection import count_ready, purge_queue, read_dead
from queuey.backends.rabbitmq._options import RabbitMqOptions
from queuey.backends.rabbitmq._wire import envelope_message
from queuey.envelope import Envelope, Kind
from queuey.errors import BackendError, ShutDownError, UnknownQueueError
from queuey.queues import QueueConfig

__all__ = ["Hold", "RabbitMqBackend"]

log = logging.getLogger("queuey.rabbitmq")


@dataclass(frozen=True)
class Hold:
    """A hold queue to (re)declare before publishing into it."""

    name: str
    base: str
    ttl_ms: int
    durable: bool


class RabbitMqBackend:
    """Jobs on RabbitMQ: priorities, hold queues for every delay, publisher confirms, and a
    connection that comes back after the broker restarts.

    Build it with ``await RabbitMqBackend.connect(url)`` (the constructor does no I/O), and
    close it with ``await backend.close()`` or ``async with``.

    Guarantees and limits:

    - Every publish is persistent, mandatory and confirmed: an unroutable message (its queue
      does not exist) is a ``BackendError``, never silently dropped.
    - A publish of several envelopes is validated as a whole before anything is sent, then
      pipelined (every message sent at once, the confirms awaited together). RabbitMQ has no
      transaction over confirms: a broker failure in the middle may leave some published.
    - A delay (``enqueue_after``, retry, deferral) goes through a hold queue per distinct
      delay, rounded up to ``options.hold_granularity``; a delay over about 24.8 days is
      refused (``ConfigError``). A delayed publish or a ``defer`` needs the queue declared by
      this backend (``UnknownQueueError`` otherwise): the hold queue copies its durability.
    - Topic queues are named ``queuey-topic.<topic>`` on the broker (see ``_topology``).

    Args:
        url: ``amqp://user:password@host:port/vhost`` (the password is never logged).
        options: tunables; ``RabbitMqOptions()`` by default.
    """

    supports_transactions = False

    def __init__(self, url: str, options: RabbitMqOptions | None = None) -> None:
        self.options = options or RabbitMqOptions()
        self._link = Link(url, self.options)
        self._link.restore = self._restore
        self._declared: dict[tuple[Kind, str], QueueConfig] = {}
        self._holds: set[str] = set()
        self._consumers: set[RabbitMqConsumer] = set()
        self._opened = False
        self._closed = False

    @classmethod
    async def connect(cls, url: str, options: RabbitMqOptions | None = None) -> RabbitMqBackend:
        """Connect to the broker at ``url``.

        Raises:
            BackendError: the broker cannot be reached or refused the login (the message
                names the URL with its password blanked).
        """
        backend = cls(url, options)
        await backend.open()
        return backend

    async def open(self) -> None:
        """Connect (what ``connect`` does after construction).

        Raises:
            BackendError: as for ``connect``.
            ShutDownError: the backend was closed; it cannot be reopened.
        """
        if self._closed:
            raise ShutDownError("this RabbitMQ backend was closed; create a new one")
        if not self._opened:
            await self._link.open()
            self._opened = True

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<RabbitMqBackend {self._link.safe_url}>"

    # -- declaring ----------------------------------------------------------------------------

    async def declare(self, queues: Sequence[QueueConfig]) -> None:
        """Declare each queue and its dead-letter queue (hold queues come on demand).

        Idempotent; the declared queues are declared again after every reconnection.

        Raises:
            ConfigError: a name too long for the derived queue names.
            BackendError: the broker refused a declaration, e.g. an existing queue without
                ``x-max-priority`` (drain and delete it, or set ``max_priority=0``).
            ShutDownError: the backend is closed.
        """
        self._check_open()
        for config in queues:
            topology.check_name(topology.broker_name(config.name, config.kind))
        channel = await self._link.channel(self._timeout)
        try:
            for config in queues:
                await declare_queue(channel, config)
                self._declared.setdefault((config.kind, config.name), config)
        finally:
            await close_quietly(channel)

    async def _restore(self, connection: AbstractConnection) -> None:
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

    async def _declare_hold(self, hold: Hold) -> None:
        """Declare (again) the hold queue ``hold``; re-declaring renews its ``x-expires``."""
        channel = await self._link.declarer()
        with translated(f"declaring hold queue {hold.name!r}"):
            await channel.declare_queue(
                hold.name,
                durable=hold.durable,
                arguments=dict(topology.hold_arguments(hold.base, hold.ttl_ms)),
            )
        self._holds.add(hold.name)

    # -- publishing ---------------------------------------------------------------------------

    def _route(
        self, envelope: Envelope, delay: timedelta | None, config: QueueConfig | None = None
    ) -> tuple[str, Hold | None]:
        """Where ``envelope`` goes: its queue now, or the hold queue for ``delay``.

        Args:
            envelope: the envelope to send.
            delay: none or zero for now.
            config: the queue's configuration (default: the one this backend declared).

        Raises:
            UnknownQueueError: a delay, on a queue this backend never declared.
            ConfigError: the delay is longer than RabbitMQ can hold a message.
        """
        base = topology.broker_name(envelope.queue, envelope.kind)
        if delay is None or delay <= timedelta(0):
            return base, None
        config = config or self._declared.get((envelope.kind, envelope.queue))
        if config is None:
            raise UnknownQueueError(envelope.queue)
        ttl = topology.hold_ttl_ms(delay, self.options.hold_granularity)
        name = topology.hold_name(base, ttl)
        return name, Hold(name, base, ttl, config.durable)

    async def _send(self, routing_key: str, message: AbstractMessage, hold: Hold | None) -> None:
        """Declare ``hold`` if given, then publish ``message`` to ``routing_key`` and await
        the broker's confirm.

        Raises:
            BackendError: refused, unroutable, or the connection was lost.
            ShutDownError: the backend is closed.
        """
        self._check_open()
        if hold is not None:
            await self._declare_hold(hold)
        await self._link.publish(routing_key, message)

    async def publish(
        self,
        envelopes: Sequence[Envelope],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> None:
        """Publish ``envelopes`` now, or through a hold queue after ``delay``.

        Every envelope is routed (and a delay validated) before anything is sent. A topic
        envelope with no subscriber (empty ``job_type``) is not sent at all.

        Raises:
            BackendError: a ``connection`` was given, or the broker refused or could not
                route a message (those before it may be published).
            UnknownQueueError: a delay on a queue this backend never declared.
            ConfigError: a delay longer than RabbitMQ can hold (about 24.8 days).
            ShutDownError: the backend is closed.
        """
        self._check_open()
        if connection is not None:
            raise BackendError("RabbitMqBackend does not take a database connection")
        plan = [
            (envelope, *self._route(envelope, delay))
            for envelope in envelopes
            if envelope.kind == "job" or envelope.job_type
        ]
        holds = {hold.name: hold for _, _, hold in plan if hold is not None}
        for hold in holds.values():
            await self._declare_hold(hold)
        if len(plan) == 1:
            await self._link.publish(plan[0][1], envelope_message(plan[0][0]))
            return
        # Pipelined: every message goes out at once and the confirms are awaited together.
        results = await asyncio.gather(
            *(self._link.publish(key, envelope_message(envelope)) for envelope, key, _ in plan),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Hold ``envelope`` for ``delay`` (rounded up to the hold granularity), then deliver
        it at its priority.

        Raises:
            UnknownQueueError: the queue was never declared by this backend.
            ConfigError: the delay is longer than RabbitMQ can hold (about 24.8 days).
            BackendError: the broker refused the hold or the publish.
            ShutDownError: the backend is closed.
        """
        self._check_open()
        if (envelope.kind, envelope.queue) not in self._declared:
            raise UnknownQueueError(envelope.queue)
        await self.publish([envelope], delay)

    # -- consuming ----------------------------------------------------------------------------

    def consumer(self, queue: QueueConfig) -> RabbitMqConsumer:
        """A consumer of ``queue`` on its own channel, with ``basic.qos(queue.prefetch)``.

        It starts consuming on its first ``next()``, and comes back by itself after a
        reconnection or after the broker cancels it (its queue deleted).
        """
        consumer = RabbitMqConsumer(self, queue)
        self._consumers.add(consumer)
        return consumer

    def _forget(self, consumer: RabbitMqConsumer) -> None:
        """Drop ``consumer`` from those ``close`` must stop (it finished on its own)."""
        self._consumers.discard(consumer)

    @property
    def reconnections(self) -> int:
        """How many times the connection was lost and re-established (0 until then)."""
        return self._link.generation - 1 if self._opened else 0

    # -- inspection ---------------------------------------------------------------------------

    async def count_pending(self, queue: str, kind: Kind = "job") -> int:
        """Messages ready in ``queue`` (not those held, delayed, or delivered and unacked).

        Returns 0 for a queue that does not exist.

        Raises:
            BackendError: the broker could not be asked.
        """
        self._check_open()
        channel = await self._link.channel(self._timeout)
        try:
            return await count_ready(channel, topology.broker_name(queue, kind))
        finally:
            await close_quietly(channel)

    async def list_dead(
        self, queue: str, kind: Kind = "job", limit: int = 100
    ) -> list[tuple[Envelope, str]]:
        """Up to ``limit`` dead letters of ``queue``, oldest first, as ``(envelope, reason)``.

        The messages are fetched unacknowledged and put back in place when the channel
        closes, so reading changes nothing (a concurrent reader may briefly see fewer).
        The reason is our ``x-death-reason`` header, else the broker's (``"expired"`` for
        a message that outlived ``message_ttl``). A body that is not an envelope is shown
        with an empty ``job_type`` and its text as payload.

        Raises:
            BackendError: the broker could not be read.
        """
        self._check_open()
        dead = topology.dead_name(topology.broker_name(queue, kind))
        channel = await self._link.channel(self._timeout)
        try:
            return await read_dead(channel, dead, queue, limit)
        finally:
            await close_quietly(channel)  # requeues everything fetched, in place

    async def purge(self, queue_names: Sequence[str], kind: Kind = "job") -> int:
        """Empty the queues named, their dead-letter queues and the hold queues this backend
        declared for them. Missing queues are skipped.

        Returns:
            The number of messages removed.

        Raises:
            BackendError: the broker refused a purge.
        """
        self._check_open()
        removed = 0
        for name in queue_names:
            base = topology.broker_name(name, kind)
            holds = sorted(h for h in self._holds if h.startswith(base + topology.HOLD_INFIX))
            for target in (base, topology.dead_name(base), *holds):
                channel = await self._link.channel(self._timeout)
                try:
                    removed += await purge_queue(channel, target)
                finally:
                    await close_quietly(channel)
        return removed

    def declared_queue_names(self) -> list[str]:
        """Every broker queue this backend declared (main, ``.dead`` and hold queues), sorted."""
        names = set(self._holds)
        for kind, name in self._declared:
            base = topology.broker_name(name, kind)
            names.update((base, topology.dead_name(base)))
        return sorted(names)

    def is_closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    async def close(self) -> None:
        """Stop the consumers and close the connection. Idempotent; safe before ``open``."""
        if self._closed:
            return
        self._closed = True
        for consumer in list(self._consumers):
            await consumer.abort()
        self._consumers.clear()
        await self._link.close()

    # -- helpers ------------------------------------------------------------------------------

    @property
    def _timeout(self) -> float:
        return self.options.publish_timeout.total_seconds()

    def _check_open(self) -> None:
        if self._closed:
            raise ShutDownError("the RabbitMQ backend is closed")
        if not self._opened:
            raise ShutDownError("the RabbitMQ backend is not open: use RabbitMqBackend.connect")
