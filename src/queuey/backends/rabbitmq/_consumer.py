"""``RabbitMqConsumer``: deliveries from one queue, on a channel it keeps alive.

A consumer owns one channel at a time with ``basic.qos(prefetch)``, and a supervisor task that
(re)establishes the broker consumer: after the connection comes back, and after the broker
cancels it while the channel stays open (its queue was deleted; the queue is declared again).
The broker consumer is registered with aiormq's ``basic_consume`` on the channel's underlying
aiormq channel, not with aio-pika's ``Queue.consume`` (``_inbound`` says why); each message
lands, as an ``Inbound``, in a local buffer that ``next`` hands out as ``RabbitMqDelivery``
objects (see ``_delivery``).

A consumer is handed the backend's ``Link`` (for channels) and ``Router`` (to publish), never
the backend; it says it has finished through the ``on_finished`` callback it was given.

A body that is not an envelope never reaches the worker: it is copied verbatim to ``q.dead``,
with its message id, headers and other properties, and the reason "malformed envelope: <what
is wrong>" (``x-death-reason``), then acknowledged (if that fails, it is rejected, which the main
queue's dead-letter exchange also routes to ``q.dead``). The consumer counts these
(``malformed``) and tells ``on_malformed``, if set, so a worker can count them as dead letters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Callable

from aio_pika.abc import AbstractChannel
from aiormq.abc import AbstractChannel as UnderlayChannel
from aiormq.abc import DeliveredMessage

from queuey._waits import first_of
from queuey.backends.base import Delivery
from queuey.backends.rabbitmq._acks import AckWindow
from queuey.backends.rabbitmq._connection import Link
from queuey.backends.rabbitmq._declaration import close_quietly, declare_queue
from queuey.backends.rabbitmq._delivery import Origin, RabbitMqDelivery, hand_back
from queuey.backends.rabbitmq._errors import describe, translated
from queuey.backends.rabbitmq._inbound import Inbound
from queuey.backends.rabbitmq._options import RabbitMqOptions
from queuey.backends.rabbitmq._router import Router
from queuey.backends.rabbitmq._topology import broker_name, dead_name
from queuey.backends.rabbitmq._wire import malformed_message
from queuey.envelope import Envelope, MalformedEnvelopeError
from queuey.errors import BackendError, ShutDownError
from queuey.queues import QueueConfig

__all__ = ["RabbitMqConsumer", "RabbitMqDelivery"]

log = logging.getLogger("queuey.rabbitmq")
_CANCEL_TIMEOUT = 5.0  # seconds to wait for the broker to confirm a basic.cancel


class RabbitMqConsumer:
    """Deliveries from one queue, at most ``prefetch`` unacknowledged (``basic.qos``).

    Args:
        link: the connection it opens its channels on.
        router: where deliveries publish their retries, deferrals and dead letters.
        config: the queue to consume.
        options: the backoff between attempts to resume consuming.
        on_finished: called with the consumer once it has stopped and every delivery it handed
            out is settled.
    """

    def __init__(
        self,
        link: Link,
        router: Router,
        config: QueueConfig,
        options: RabbitMqOptions,
        on_finished: Callable[[RabbitMqConsumer], None],
    ) -> None:
        self.config = config
        self.base = broker_name(config.name, config.kind)
        self._link = link
        self._router = router
        self._options = options
        self._on_finished = on_finished
        self._origin = Origin(config, dead_name(self.base), router, self._delivery_settled)
        self._buffer: deque[Inbound | None] = deque()  # None: no more
        self._waiter: asyncio.Future[None] | None = None  # ``next`` waiting for the buffer
        self._supervisor: asyncio.Task[None] | None = None
        self._channel: AbstractChannel | None = None
        self._consuming: tuple[UnderlayChannel, str] | None = None
        self._stop_event = asyncio.Event()
        self._idle = False
        self._stopping = False
        self._aborted = False
        self._exhausted = False
        self._unsettled = 0
        self._window = AckWindow()
        self.malformed = 0
        """How many malformed messages this consumer moved to the dead letters."""
        self.on_malformed: Callable[[str | None, str], None] | None = None
        """Called with ``(message id, reason)`` for each malformed message dead-lettered."""

    async def next(self) -> Delivery | None:
        """The next delivery; ``None`` once ``stop`` was called and the buffer is drained.

        Raises:
            BackendError: the backend was closed underneath this consumer.
        """
        if self._supervisor is None and not self._stopping:
            self._supervisor = asyncio.create_task(
                self._supervise(), name=f"queuey-consumer:{self.base}"
            )
        while not self._exhausted:
            if not self._buffer:
                await self._arrival()
            message = self._buffer.popleft()
            if message is None:
                self._exhausted = True
                break
            delivery = await self._deliver(message)
            if delivery is not None:
                return delivery
        if self._aborted:
            raise BackendError(f"the consumer of {self.base!r} ended: the backend was closed")
        return None

    async def stop(self) -> None:
        """Cancel the broker consumer; what was already received is still handed out.

        The channel stays open until every handed-out delivery is settled.
        """
        if self._stopping:
            return
        self._stopping = True
        await self._end_supervisor()
        self._put(None)
        await self._close_if_drained()

    async def abort(self) -> None:
        """Stop at once because the backend is closing: ``next`` raises ``BackendError``."""
        self._aborted = not self._stopping
        self._stopping = True
        await self._end_supervisor()
        self._put(None)
        await close_quietly(self._channel)

    # -- settling bookkeeping (the deliveries' ``Origin.settled``) -----------------------------

    async def _delivery_settled(self) -> None:
        """One handed-out delivery was settled (or given up on)."""
        self._unsettled -= 1
        await self._close_if_drained()

    async def _close_if_drained(self) -> None:
        if self._stopping and self._unsettled == 0 and len(self._buffer) <= 1:
            channel, self._channel = self._channel, None
            await close_quietly(channel)
            self._on_finished(self)

    # -- receiving ----------------------------------------------------------------------------

    async def _on_message(self, delivered: DeliveredMessage) -> None:
        message = Inbound(delivered)
        self._window.received(message)
        if self._stopping:
            with contextlib.suppress(Exception):  # arrived after stop: back to the queue
                await hand_back(message, self._router, _envelope_or_none(message.body))
            self._window.settled(message)
            return
        self._put(message)

    def _put(self, message: Inbound | None) -> None:
        """Buffer ``message`` (``None``: nothing more comes) and wake ``next``."""
        self._buffer.append(message)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _arrival(self) -> None:
        """Wait until the buffer holds something."""
        while not self._buffer:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None

    async def _deliver(self, message: Inbound) -> Delivery | None:
        if not message.alive():
            return None  # its channel died with the connection: the broker redelivers it
        try:
            envelope = Envelope.from_bytes(message.body)
        except MalformedEnvelopeError as exc:
            await self._bury_malformed(message, str(exc))
            self._window.settled(message)
            return None
        if envelope.kind == "topic" and not envelope.job_type:
            with contextlib.suppress(Exception):
                await message.ack()  # nobody subscribes: recorded as handled
            self._window.settled(message)
            return None
        self._unsettled += 1
        return RabbitMqDelivery(self._origin, message, envelope, self._window)

    async def _bury_malformed(self, message: Inbound, reason: str) -> None:
        dead = self._origin.dead
        log.error(
            "malformed message %s on %s moved to %s: %s",
            message.message_id,
            self.base,
            dead,
            reason,
        )
        self.malformed += 1
        if self.on_malformed is not None:
            try:
                self.on_malformed(message.message_id, reason)
            except Exception:
                log.exception("on_malformed callback failed")
        copy = malformed_message(message.body, self.config.name, reason, message.properties())
        deadline = self._router.deadline()
        try:
            await self._router.send(dead, copy, deadline=deadline)
            async with self._router.bounded(
                f"acknowledging a malformed message on {self.base!r}", deadline
            ):
                await message.ack()
        except Exception as exc:
            log.error("could not copy a malformed message to %s (%s); rejecting it", dead, exc)
            try:
                await message.reject(requeue=False)  # the main queue dead-letters it
            except Exception as again:
                log.error("could not reject a malformed message on %s: %s", self.base, again)

    # -- the supervisor -----------------------------------------------------------------------

    async def _end_supervisor(self) -> None:
        task, self._supervisor = self._supervisor, None
        if task is None or task.done():
            return
        if self._idle:
            self._stop_event.set()  # it cancels the broker consumer and returns
        else:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _supervise(self) -> None:
        options = self._options
        first = wait = options.reconnect_initial.total_seconds()
        while not self._stopping:
            try:
                await self._run_channel()
                wait = first
            except ShutDownError:
                return
            except Exception as exc:  # keep consuming whatever happened; say so
                log.warning(
                    "consumer of %s interrupted (%s); resuming in %.1fs",
                    self.base,
                    describe(exc),
                    wait,
                )
                await asyncio.sleep(wait)
                wait = min(options.reconnect_max.total_seconds(), wait * 2)

    async def _run_channel(self) -> None:
        channel = self._channel = await self._link.channel()
        self._window = AckWindow()  # delivery tags start again on a new channel
        with translated(f"consuming {self.base!r}"):
            await channel.set_qos(prefetch_count=self.config.prefetch)
            underlay = await channel.get_underlay_channel()
        cancelled = asyncio.Event()
        underlay.on_consumer_cancel_callbacks.add(lambda _frame: cancelled.set())
        while not self._stopping:
            cancelled.clear()
            await declare_queue(channel, self.config, self._router.quorum)  # if it was deleted
            tag = _consumer_tag(self.base)
            with translated(f"consuming {self.base!r}"):
                await underlay.basic_consume(self.base, self._on_message, consumer_tag=tag)
            self._consuming = (underlay, tag)
            self._idle = True
            try:
                await first_of(channel.closed(), cancelled.wait(), self._stop_event.wait())
            finally:
                self._idle = False
            if self._stop_event.is_set():
                await self._cancel_consuming()
                return
            self._consuming = None
            if channel.is_closed:
                return
            log.warning("the broker cancelled the consumer of %s; consuming again", self.base)

    async def _cancel_consuming(self) -> None:
        consuming, self._consuming = self._consuming, None
        if consuming is not None:
            underlay, tag = consuming
            with contextlib.suppress(Exception):
                await underlay.basic_cancel(tag, timeout=_CANCEL_TIMEOUT)


def _envelope_or_none(body: bytes) -> Envelope | None:
    try:
        return Envelope.from_bytes(body)
    except MalformedEnvelopeError:
        return None


def _consumer_tag(base: str) -> str:
    short = base.encode()[:160].decode(errors="ignore")
    return f"queuey.{short}.{uuid.uuid4().hex[:16]}"
