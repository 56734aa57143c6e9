"""``RabbitMqBackend``: the ``Backend`` contract on RabbitMQ 3.10+ classic or quorum queues.

The backend is a thin assembler: it owns a ``Link`` (the connection and its reconnection,
``_connection``), a ``Publisher`` (confirmed publishes under ``publish_timeout``,
``_publisher``), a ``Router`` (routing, hold queues and the declared queues, ``_router``) and
the consumers it made (``_consumer``, deliveries in ``_delivery``), and hands each consumer
the link and the router, never itself. Names and arguments are in ``_topology``, the wire
format in ``_wire``, read-only looks at the broker in ``_inspection``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Self

from queuey.backends._runs import OpenRuns
from queuey.backends._unclosed import LoopGuard
from queuey.backends.base import CancelResult, JobInfo
from queuey.backends.rabbitmq._connection import Link
from queuey.backends.rabbitmq._consumer import RabbitMqConsumer
from queuey.backends.rabbitmq._declaration import close_quietly, declare_queue
from queuey.backends.rabbitmq._inspection import count_ready, purge_queue, read_dead
from queuey.backends.rabbitmq._lifecycle import Lifecycle
from queuey.backends.rabbitmq._options import RabbitMqOptions
from queuey.backends.rabbitmq._publisher import Publisher
from queuey.backends.rabbitmq._router import Router
from queuey.backends.rabbitmq._topology import (
    Quorum,
    broker_name,
    check_limits,
    check_name,
    dead_name,
    max_hold,
)
from queuey.envelope import Envelope, Kind
from queuey.errors import (
    BackendError,
    ConfigError,
    NotSupportedError,
    ShutDownError,
    UnknownQueueError,
)
from queuey.queues import QueueConfig

__all__ = ["RabbitMqBackend"]


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
      delay, rounded up to ``options.hold_granularity``; a delay over ``max_delay`` (about
      24.8 days) is refused (``ConfigError``), and so is, at ``declare``, a queue whose retry
      policy could wait longer or whose ``message_ttl`` is over about 49.7 days. A delayed
      publish or a ``defer`` needs the queue declared by this backend (``UnknownQueueError``
      otherwise): the hold queue copies its durability. A hold queue is declared once per
      connection (renewed before its ``x-expires`` could run out), not once per publish.
    - Every publish, and every settle of a delivery, is bounded by
      ``options.publish_timeout`` in total, however many other calls are waiting: when the
      broker is unreachable it fails with a ``BackendError`` saying so.
    - Topic queues are named ``queuey-topic.<topic>`` on the broker (see ``_topology``).
    - With ``options.queue_type="quorum"`` every queue is a replicated quorum queue that
      dead-letters at least once; a queue with priorities or ``durable=False`` is then refused
      (``ConfigError``), and a job whose worker is lost ``options.max_redeliveries`` times is
      dead-lettered by the broker. A queue that exists as the other type is a ``BackendError``
      naming it and the migration path.

    - Given a cluster's URLs (a list, or one string of URLs separated by commas), it connects
      to the first that answers, and after losing its connection (the node died) to the next
      one that answers: consumers resume there, and a publish in flight is sent again on the
      new connection (at least once), confirmed or failed within ``publish_timeout``.

    Args:
        url: ``amqp://user:password@host:port/vhost`` (the password is never logged), or the
            URLs of a cluster's nodes, tried in turn.
        options: tunables; ``RabbitMqOptions()`` by default.
    """

    supports_transactions = False
    messaging_system = "rabbitmq"

    def __init__(self, url: str | Sequence[str], options: RabbitMqOptions | None = None) -> None:
        self.options = options or RabbitMqOptions()
        self.max_delay = max_hold(self.options.hold_granularity)
        """The longest delay a hold queue takes: about 24.8 days."""
        self._lifecycle = Lifecycle()
        self._link = Link(url, self.options)
        self._publisher = Publisher(self._link, self.options)
        self._router = Router(
            self._publisher, self._lifecycle, self.options.hold_granularity, _quorum(self.options)
        )
        self._link.restore = self._router.restore
        self._consumers: set[RabbitMqConsumer] = set()
        self._guard = LoopGuard("RabbitMqBackend", self.close)
        self._open_runs = OpenRuns("RabbitMqBackend")

    @classmethod
    async def connect(
        cls, url: str | Sequence[str], options: RabbitMqOptions | None = None
    ) -> RabbitMqBackend:
        """Connect to the broker at ``url`` (or to the first of a cluster's URLs that answers).

        Raises:
            ConfigError: a URL is not an AMQP URL.
            BackendError: no broker can be reached or one refused the login (the message
                names each URL with its password blanked).
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
        if self._lifecycle.closed:
            raise ShutDownError("this RabbitMQ backend was closed; create a new one")
        if not self._lifecycle.opened:
            await self._link.open()
            self._lifecycle.opened = True
            self._guard.start()  # closes the backend at loop shutdown if the program does not

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
            ConfigError: a name too long for the derived queue names, a ``message_ttl`` over
                about 49.7 days, or a retry policy that may wait longer than ``max_delay``
                (nothing is declared).
            BackendError: the broker refused a declaration, e.g. an existing queue without
                ``x-max-priority`` (drain and delete it, or set ``max_priority=0``), or did not
                answer within ``publish_timeout`` (it is unreachable).
            ShutDownError: the backend is closed.
        """
        self._lifecycle.check_open()
        for config in queues:
            check_name(broker_name(config.name, config.kind))
            check_limits(config, self.max_delay)
            self._router.check(config)
        async with self._publisher.bounded("declaring queues", self._publisher.deadline()):
            channel = await self._link.channel()
            try:
                for config in queues:
                    await declare_queue(channel, config, self._router.quorum)
                    self._router.remember(config)
            finally:
                await close_quietly(channel)

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
            ConfigError: a delay longer than RabbitMQ can hold (``max_delay``, about 24.8 days).
            ShutDownError: the backend is closed.
        """
        self._lifecycle.check_open()
        if connection is not None:
            raise BackendError("RabbitMqBackend does not take a database connection")
        await self._router.publish(envelopes, delay)

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Hold ``envelope`` for ``delay`` (rounded up to the hold granularity), then deliver
        it at its priority.

        Raises:
            UnknownQueueError: the queue was never declared by this backend.
            ConfigError: the delay is longer than RabbitMQ can hold (about 24.8 days).
            BackendError: the broker refused the hold or the publish.
            ShutDownError: the backend is closed.
        """
        self._lifecycle.check_open()
        if not self._router.knows(envelope.kind, envelope.queue):
            raise UnknownQueueError(envelope.queue)
        await self.publish([envelope], delay)

    async def cancel(self, job_id: str) -> CancelResult:
        """Refused: a message in a RabbitMQ queue cannot be taken out by id (the broker has no
        such operation), and its worker cannot be reached.

        Raises:
            NotSupportedError: always.
        """
        raise NotSupportedError(
            f"cannot cancel job {job_id}: RabbitMQ cannot remove a queued message by id "
            "(cancellation needs the PostgreSQL or memory backend)"
        )

    # -- consuming ----------------------------------------------------------------------------

    def consumer(self, queue: QueueConfig) -> RabbitMqConsumer:
        """A consumer of ``queue`` on its own channel, with ``basic.qos(queue.prefetch)``.

        It starts consuming on its first ``next()``, and comes back by itself after a
        reconnection or after the broker cancels it (its queue deleted).

        Raises:
            ConfigError: ``queue`` cannot be a quorum queue (``queue_type="quorum"``: it has
                priorities or is not durable), or it has flow limits (``queue.limits``: a
                broker cannot count a key's starts or running jobs across consumers).
        """
        if queue.limits:
            raise ConfigError(
                f"queue {queue.name!r}: flow limits ({', '.join(s.label for s in queue.limits)}) "
                "are not supported on RabbitMQ: a broker cannot enforce a limit across "
                "consumers; use the PostgreSQL backend, or remove limits= from the queue and "
                "its job classes"
            )
        self._router.check(queue)
        consumer = RabbitMqConsumer(
            self._link, self._router, queue, self.options, self._consumers.discard
        )
        self._consumers.add(consumer)
        return consumer

    @property
    def connected(self) -> bool:
        """Whether the connection to the broker is up, as far as the client knows."""
        return self._link.connected

    @property
    def reconnections(self) -> int:
        """How many times the connection was lost and re-established (0 until then)."""
        return self._link.generation - 1 if self._lifecycle.opened else 0

    # -- inspection ---------------------------------------------------------------------------

    async def count_pending(self, queue: str, kind: Kind = "job") -> int:
        """Messages ready in ``queue`` (not those held, delayed, or delivered and unacked).

        Returns 0 for a queue that does not exist.

        Raises:
            BackendError: the broker could not be asked.
        """
        self._lifecycle.check_open()
        channel = await self._link.channel(self._timeout)
        try:
            return await count_ready(channel, broker_name(queue, kind))
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
        self._lifecycle.check_open()
        dead = dead_name(broker_name(queue, kind))
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
        self._lifecycle.check_open()
        removed = 0
        for name in queue_names:
            base = broker_name(name, kind)
            for target in (base, dead_name(base), *self._router.holds_of(base)):
                channel = await self._link.channel(self._timeout)
                try:
                    removed += await purge_queue(channel, target)
                finally:
                    await close_quietly(channel)
        return removed

    async def job(self, job_id: str) -> JobInfo | None:
        """Not supported: a broker keeps messages, not jobs, and cannot find one by id.

        Raises:
            NotSupportedError: always; look jobs up on PostgreSQL (or ``MemoryBackend`` in
                tests), or follow them in the worker's log lines, which name each job's id.
        """
        raise NotSupportedError(
            f"RabbitMqBackend cannot look up job {job_id}: a broker keeps messages, not jobs, "
            "and cannot find one by id (PostgreSQL and MemoryBackend can; the worker's log "
            "lines name each job's id)"
        )

    def declared_queue_names(self) -> list[str]:
        """Every broker queue this backend declared (main, ``.dead`` and hold queues), sorted."""
        return self._router.queue_names()

    def is_closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._lifecycle.closed

    def keep_open_for(self, runs: Iterable[asyncio.Future[Any]]) -> None:
        """Make ``close`` wait for ``runs`` (``RunKeeper``): until they end, their messages
        stay unacknowledged on their channel (never redelivered to another consumer), and
        their outcomes can be recorded."""
        self._open_runs.keep(runs)

    async def close(self) -> None:
        """Wait for the runs given to ``keep_open_for``, then stop the consumers and close
        the connection. Idempotent; safe before ``open``.

        A backend still open when its event loop shuts down (``asyncio.run`` returning or
        raising) is closed then, with a ``ResourceWarning`` naming the line that opened it.
        """
        if self._lifecycle.closed:
            return
        await self._open_runs.wait()
        self._lifecycle.closed = True
        self._guard.stop()
        for consumer in list(self._consumers):
            await consumer.abort()
        self._consumers.clear()
        self._publisher.close()
        await self._link.close()

    # -- helpers ------------------------------------------------------------------------------

    @property
    def _timeout(self) -> float:
        return self.options.publish_timeout.total_seconds()


def _quorum(options: RabbitMqOptions) -> Quorum | None:
    """The quorum queues ``options`` ask for: a job lost ``max_redeliveries`` times is
    dead-lettered, so the broker may return it ``max_redeliveries - 1`` times."""
    return Quorum(options.max_redeliveries - 1) if options.quorum else None
