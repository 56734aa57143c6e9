"""Publishing over the backend's ``Link``: the publisher confirm channel, the deadline every
publish path runs under, and the errors that say the broker is unreachable.

Publishes go through one channel in confirm mode, mandatory, each awaited until the broker
confirms it. aiormq matches a ``basic.return`` to its publish by ``message_id`` (our job id),
so two publishes with one ``message_id`` are never in flight at once on that channel.

Every publish path is bounded by ``publish_timeout`` in total: its caller takes a
``deadline()`` once, at the start of the call, and every wait after it (for the reconnection,
a lock, a channel, a hold queue's declaration, the confirm) runs under ``bounded(what,
deadline)``, with what is left of it. Running out of time says the broker is unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence

from aio_pika.abc import AbstractChannel, AbstractMessage
from aio_pika.exceptions import DeliveryError, PublishError

from queuey.backends.rabbitmq._connection import Link
from queuey.backends.rabbitmq._options import RabbitMqOptions
from queuey.errors import BackendUnavailableError, QueueyError

__all__ = ["Publisher"]

log = logging.getLogger("queuey.rabbitmq")

_REFUSED_PAUSE = 0.25  # seconds between two tries of a publish the broker refused (nack)


class Publisher:
    """Confirmed, mandatory publishes to the default exchange over ``link``, each bounded by
    ``options.publish_timeout``.

    Args:
        link: the backend's connection (the confirm channel is opened on it, and again on
            every new connection).
        options: ``publish_timeout``.
    """

    def __init__(self, link: Link, options: RabbitMqOptions) -> None:
        self.link = link
        self._options = options
        self._channel: AbstractChannel | None = None
        self._generation = -1  # the link generation ``_channel`` was opened on
        self._channel_lock = asyncio.Lock()
        self._in_flight: dict[str, asyncio.Event | None] = {}  # by message id
        self._refused_at = float("-inf")  # loop time of the last negative confirm
        self._retiring: set[asyncio.Task[None]] = set()  # refused channels closing later

    def close(self) -> None:
        """Stop closing refused channels later (the link's close closes them). Idempotent."""
        for task in list(self._retiring):
            task.cancel()

    def deadline(self) -> float:
        """The event-loop time by which a publish path starting now must be done:
        ``publish_timeout`` from now. Take it once, at the start of the call."""
        return asyncio.get_running_loop().time() + self._publish_timeout

    @contextlib.asynccontextmanager
    async def bounded(self, what: str, deadline: float) -> AsyncIterator[None]:
        """Run the block until ``deadline`` at the latest, its failures translated.

        Raises:
            BackendError: a driver or socket failure in the block (``what`` first), or
                ``deadline`` passed: the message says the broker is unreachable.
        """
        try:
            async with asyncio.timeout_at(deadline):
                with self.link.translating(what):
                    yield
        except TimeoutError:
            raise self.unreachable(what) from None

    async def publish(self, routing_key: str, message: AbstractMessage, deadline: float) -> None:
        """Publish ``message`` to the default exchange, mandatory, and wait for the confirm,
        all by ``deadline`` (a reconnection in progress, the channel, the confirm).

        Raises:
            UnroutableError: no queue ``routing_key`` (a ``BackendError``).
            BackendError: refused, the connection was lost, or ``deadline`` passed (the broker
                is unreachable).
            ShutDownError: the backend is closed.
        """
        async with self.bounded(f"publishing to {routing_key!r}", deadline):
            await self._publish(routing_key, message)

    async def publish_window(
        self, messages: Sequence[tuple[str, AbstractMessage]], deadline: float
    ) -> list[BaseException | None]:
        """Publish each ``(routing key, message)`` as ``publish`` does, pipelined: every
        confirm awaited together, the whole window by ``deadline`` (one timer, not one per
        message). Returns, per message in order, ``None`` or its error (a ``BackendError``
        naming its routing key).

        Raises:
            BackendError: ``deadline`` passed: the broker is unreachable.
            ShutDownError: the backend is closed.
        """
        try:
            async with asyncio.timeout_at(deadline):
                return await asyncio.gather(
                    *(self._publish(key, message) for key, message in messages),
                    return_exceptions=True,
                )
        except TimeoutError:
            raise self.unreachable(_publishing(messages)) from None

    def unreachable(self, what: str) -> BackendUnavailableError:
        """The error of ``what`` not done within ``publish_timeout``: the broker is
        unreachable (or, while reconnecting, not connected)."""
        limit = f"{self._publish_timeout:g}s"
        refused = asyncio.get_running_loop().time() - self._refused_at < self._publish_timeout
        connected, url = self.link.connected, self.link.safe_url
        if refused and connected:
            return BackendUnavailableError(
                f"{what}: the broker at {url} refused it (negative confirms) for "
                f"{limit} (publish_timeout): a quorum queue refuses publishes while it has no "
                "leader (a node died and no majority is left, or an election is under way)"
            )
        if connected:
            why = f"no answer within {limit} (publish_timeout)"
        else:
            why = f"not connected for {limit} (publish_timeout); still reconnecting"
        return BackendUnavailableError(f"{what}: the broker at {url} is unreachable: {why}")

    async def _publish(self, routing_key: str, message: AbstractMessage) -> None:
        """Publish and await the confirm, again after a lost connection (the broker may have
        had the message before the confirm: at least once, never lost), a driver failure
        raised as ``BackendError`` naming the queue; never two messages with one
        ``message_id`` in flight at once (the module docstring says why). Call it under a
        deadline."""
        key = message.message_id or ""
        while key in self._in_flight:
            waiter = self._in_flight[key]
            if waiter is None:
                waiter = self._in_flight[key] = asyncio.Event()
            await waiter.wait()
        self._in_flight[key] = None  # an Event only once someone waits for this id
        what = f"publishing to {routing_key!r}"

        async def publish() -> None:
            await self._publish_until_accepted(routing_key, message)

        try:
            await self.link.again_after_reconnecting(publish, what)
        except QueueyError:
            raise
        except Exception:
            with self.link.translating(what):
                raise
        finally:
            waiter = self._in_flight.pop(key, None)
            if waiter is not None:
                waiter.set()

    async def _publish_until_accepted(self, routing_key: str, message: AbstractMessage) -> None:
        """Publish on the confirm channel; a negative confirm (``basic.nack``) is tried again
        after a pause, on a new channel, until the caller's deadline. A quorum queue whose
        leader died refuses publishes until its nodes elect another (seconds), and a channel
        that published to it while it had no leader keeps being refused after the election
        (RabbitMQ 3.10), so the refused channel is retired: the messages still in flight on
        it finish there, new ones go to a new channel."""
        while True:
            publisher = self._usable() or await self._confirm_channel()
            try:
                await publisher.default_exchange.publish(message, routing_key, mandatory=True)
                return
            except PublishError:
                raise  # returned unroutable: no such queue (a DeliveryError too)
            except DeliveryError:
                self._refused_at = asyncio.get_running_loop().time()
                log.debug("the broker refused a publish to %r; trying again", routing_key)
                self._retire(publisher)
            await asyncio.sleep(_REFUSED_PAUSE)

    def _retire(self, publisher: AbstractChannel) -> None:
        """Stop publishing on ``publisher`` and close it once what is in flight on it is done
        (``publish_timeout`` later)."""
        if self._channel is not publisher:
            return  # retired already
        self._channel = None

        async def close_later() -> None:
            await asyncio.sleep(self._publish_timeout)
            with contextlib.suppress(Exception):
                await publisher.close()

        task = asyncio.create_task(close_later(), name="queuey-rabbitmq-retire")
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    @property
    def _publish_timeout(self) -> float:
        return self._options.publish_timeout.total_seconds()

    def _usable(self) -> AbstractChannel | None:
        """The confirm channel, if it is open on the link's current connection."""
        channel = self._channel
        if channel is None or channel.is_closed or self._generation != self.link.generation:
            return None
        return channel

    async def _confirm_channel(self) -> AbstractChannel:
        async with self._channel_lock:
            channel = self._usable()
            if channel is None:
                connection = await self.link.connection()
                generation = self.link.generation
                channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
                self._channel, self._generation = channel, generation
            return channel


def _publishing(messages: Sequence[tuple[str, AbstractMessage]]) -> str:
    """What publishing ``messages`` is, for its errors: "publishing 3 messages to 'q'"."""
    keys = sorted({key for key, _ in messages})
    where = repr(keys[0]) if len(keys) == 1 else f"{len(keys)} queues"
    return f"publishing {len(messages)} messages to {where}"
