"""``Router``: where an envelope goes on the broker and getting it there, confirmed.

An envelope goes to its queue now, or to the hold queue of its delay (declared on demand), and
every publish waits for the broker's confirm. The router also remembers the queues this backend
declared: a delay needs the queue's durability (the hold queue copies it), and the queues are
declared again on every new connection (``restore``, run by the ``Link`` before anyone else may
use the connection). The backend publishes through it, and so do its consumers' deliveries
(retries, deferrals, dead letters), which never see the backend itself.

A hold queue is declared once per connection, not once per publish: the declaration is
remembered with the connection's generation and forgotten when the connection is replaced.
It is also renewed before its ``x-expires`` (twice its TTL) can run out: the broker deletes a
hold queue that nobody re-declared for that long, and publishing into it does not count, so a
declaration is trusted for half a TTL only (a message published then has left the hold queue
long before it could expire). A hold queue deleted behind our back (by an operator, a purge)
turns a publish into an unroutable return: the router declares it again and publishes once
more, within the same deadline.

Every publish path takes one deadline, ``publish_timeout`` from the start of the call, and every
wait after it (the hold declaration and its lock, the channel, the confirm) uses what is left.
A batch is published in windows of ``PIPELINE`` messages, each window within
``publish_timeout`` of its start: a broker that stops answering fails the call within
``publish_timeout``, while a batch too large to confirm in that time does not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta

from aio_pika.abc import AbstractConnection, AbstractMessage

from queuey.backends.rabbitmq._declaration import close_quietly, declare_queue
from queuey.backends.rabbitmq._errors import UnroutableError, declaring, translated
from queuey.backends.rabbitmq._lifecycle import Lifecycle
from queuey.backends.rabbitmq._publisher import Publisher
from queuey.backends.rabbitmq._topology import (
    HOLD_INFIX,
    Quorum,
    broker_name,
    check_quorum,
    dead_name,
    hold_arguments,
    hold_name,
    hold_ttl_ms,
)
from queuey.backends.rabbitmq._wire import envelope_message
from queuey.envelope import Envelope, Kind
from queuey.errors import BackendError, UnknownQueueError
from queuey.queues import QueueConfig

__all__ = ["PIPELINE", "Hold", "Router"]

PIPELINE = 1000
"""Messages of one batch published before their confirms are awaited together."""


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
        publisher: publishes over the backend's connection (its ``link``).
        lifecycle: the backend's open/closed state; nothing is published unless open.
        hold_granularity: delays are rounded up to a whole number of these.
        quorum: declare quorum queues (``None``: classic queues).
    """

    def __init__(
        self,
        publisher: Publisher,
        lifecycle: Lifecycle,
        hold_granularity: timedelta,
        quorum: Quorum | None = None,
    ) -> None:
        self.quorum = quorum
        """Whether (and how) the queues are quorum queues; ``None`` for classic queues."""
        self._publisher = publisher
        self._link = publisher.link
        self._lifecycle = lifecycle
        self._granularity = hold_granularity
        self._declared: dict[tuple[Kind, str], QueueConfig] = {}
        self._holds: set[str] = set()
        self._fresh: dict[str, tuple[int, float]] = {}  # hold -> (link generation, trusted until)
        self._hold_lock = asyncio.Lock()
        self.hold_declarations = 0
        """How many hold-queue declarations were sent to the broker (for tests and operators)."""

    # -- the declared queues ------------------------------------------------------------------

    def check(self, config: QueueConfig) -> None:
        """Refuse a queue these queues cannot be (quorum queues: no priorities, durable).

        Raises:
            ConfigError: naming the queue and what to change.
        """
        if self.quorum is not None:
            check_quorum(config)

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
                await declare_queue(channel, config, self.quorum)
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

    def held_for(self, delay: timedelta) -> timedelta:
        """How long a message published with ``delay`` is really held: ``delay`` rounded up
        to the hold granularity (zero stays zero)."""
        if delay <= timedelta(0):
            return timedelta(0)
        return timedelta(milliseconds=hold_ttl_ms(delay, self._granularity))

    def deadline(self) -> float:
        """The deadline of a publish path starting now (see ``Publisher.deadline``)."""
        return self._publisher.deadline()

    def bounded(self, what: str, deadline: float) -> AbstractAsyncContextManager[None]:
        """Run a block by ``deadline`` (see ``Publisher.bounded``)."""
        return self._publisher.bounded(what, deadline)

    def translating(self, what: str) -> AbstractContextManager[None]:
        """A block whose driver failures are translated (see ``Link.translating``)."""
        return self._link.translating(what)

    def unreachable(self, what: str) -> BackendError:
        """The error of ``what`` past ``publish_timeout`` (see ``Publisher.unreachable``)."""
        return self._publisher.unreachable(what)

    async def send(
        self,
        routing_key: str,
        message: AbstractMessage,
        hold: Hold | None = None,
        deadline: float | None = None,
    ) -> None:
        """Declare ``hold`` if given (and not declared on this connection yet), then publish
        ``message`` to ``routing_key`` and await the broker's confirm, all by ``deadline``
        (default: ``publish_timeout`` from now).

        Raises:
            BackendError: refused, unroutable, the connection was lost, or the deadline passed
                (the broker is unreachable).
            ShutDownError: the backend is closed.
        """
        self._lifecycle.check_open()
        await self._send(
            routing_key, message, hold, self.deadline() if deadline is None else deadline
        )

    async def publish(self, envelopes: Sequence[Envelope], delay: timedelta | None) -> None:
        """Route every envelope (validating a delay) before sending any, then publish them
        pipelined in windows of ``PIPELINE`` messages (a window's messages go out at once and
        their confirms are awaited together), each window within ``publish_timeout`` (seconds)
        of its start. A topic envelope with no subscriber (empty
        ``job_type``) is not sent.

        Raises:
            BackendError: the broker refused or could not route a message (those before it
                may be published), or did not answer in time (it is unreachable).
            UnknownQueueError: a delay on a queue never declared here.
            ConfigError: a delay longer than RabbitMQ can hold.
            ShutDownError: the backend is closed.
        """
        self._lifecycle.check_open()
        deadline = self.deadline()
        plan = [
            (envelope, *self.route(envelope, delay))
            for envelope in envelopes
            if envelope.kind == "job" or envelope.job_type
        ]
        holds = {hold.name: hold for _, _, hold in plan if hold is not None}
        for needed in holds.values():
            await self._ensure_hold(needed, deadline)
        if len(plan) == 1:
            envelope, key, hold = plan[0]
            await self._send(key, envelope_message(envelope), hold, deadline)
            return
        for start in range(0, len(plan), PIPELINE):
            if start:  # each window has its own deadline: a big batch is not a slow broker
                deadline = self.deadline()
            await self._send_window(plan[start : start + PIPELINE], deadline)

    async def _send_window(
        self, window: Sequence[tuple[Envelope, str, Hold | None]], deadline: float
    ) -> None:
        """Publish ``window`` pipelined (every confirm awaited together) by ``deadline``."""
        results: list[BaseException | None]
        if any(hold is not None for _, _, hold in window):
            results = await asyncio.gather(
                *(
                    self._send(key, envelope_message(envelope), hold, deadline)
                    for envelope, key, hold in window
                ),
                return_exceptions=True,
            )
        else:  # straight to their queues: one deadline for the window
            messages = [(key, envelope_message(envelope)) for envelope, key, _ in window]
            results = await self._publisher.publish_window(messages, deadline)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _send(
        self, routing_key: str, message: AbstractMessage, hold: Hold | None, deadline: float
    ) -> None:
        if hold is not None:
            await self._ensure_hold(hold, deadline)
        try:
            await self._publisher.publish(routing_key, message, deadline)
        except UnroutableError:
            if hold is None:
                raise
            # The hold queue is gone (deleted behind our back): declare it again, once.
            self._fresh.pop(hold.name, None)
            await self._ensure_hold(hold, deadline)
            await self._publisher.publish(routing_key, message, deadline)

    async def _ensure_hold(self, hold: Hold, deadline: float) -> None:
        """Declare the hold queue ``hold`` unless this connection already did so recently
        (see the module docstring); concurrent callers wait for one declaration."""
        if self._is_fresh(hold.name):
            return
        what = f"declaring hold queue {hold.name!r}"

        async def declare() -> None:
            if self._is_fresh(hold.name):
                return  # declared while we waited (for the lock, or the connection)
            channel = await self._link.declarer()
            generation = self._link.generation
            self.hold_declarations += 1
            with declaring(what, self.quorum is not None):
                await channel.declare_queue(
                    hold.name,
                    durable=hold.durable,
                    arguments=dict(hold_arguments(hold.base, hold.ttl_ms, self.quorum)),
                )
            trusted = asyncio.get_running_loop().time() + hold.ttl_ms / 2000
            self._fresh[hold.name] = (generation, trusted)
            self._holds.add(hold.name)

        async with self.bounded(what, deadline), self._hold_lock:
            await self._link.again_after_reconnecting(declare, what)

    def _is_fresh(self, name: str) -> bool:
        fresh = self._fresh.get(name)
        if fresh is None:
            return False
        generation, trusted = fresh
        if generation != self._link.generation or asyncio.get_running_loop().time() >= trusted:
            del self._fresh[name]
            return False
        return True
