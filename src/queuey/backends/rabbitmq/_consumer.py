"""Consumers and deliveries of the RabbitMQ backend.

A ``RabbitMqConsumer`` owns one channel at a time with ``basic.qos(prefetch)``, and a
supervisor task that (re)establishes the consumer: after the connection comes back, and after
the broker cancels it while the channel stays open (its queue was deleted; the queue is
declared again). Messages land in a local buffer that ``next`` hands out.

A body that is not an envelope never reaches the worker: it is copied verbatim to ``q.dead``
with the reason "malformed envelope" and acknowledged (if that fails, it is rejected, which
the main queue's dead-letter exchange also routes to ``q.dead``).

Plain acks go through the channel's ``AckWindow``: one ``basic.ack(multiple)`` for the deliveries
handled in order, so a drain sends a fraction of the frames.

A ``RabbitMqDelivery`` publishes before it acknowledges (a retry, deferral or dead letter is
confirmed by the broker before the original is acked), so a failure in between yields a
duplicate, never a loss. A delivery whose channel died with the connection cannot be settled:
its settle raises ``BackendError`` at once (the broker redelivers the job), without
publishing a duplicate first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractMessage, AbstractQueue
from aio_pika.exceptions import ChannelInvalidStateError

from queuey.backends.base import Delivery
from queuey.backends.rabbitmq import _topology as topology
from queuey.backends.rabbitmq._acks import AckWindow
from queuey.backends.rabbitmq._declaration import close_quietly, declare_queue
from queuey.backends.rabbitmq._errors import describe, translated
from queuey.backends.rabbitmq._wire import (
    dead_headers,
    envelope_message,
    malformed_message,
    retry_headers,
)
from queuey.envelope import Envelope, MalformedEnvelopeError
from queuey.errors import BackendError, ConfigError, ShutDownError
from queuey.queues import QueueConfig

if TYPE_CHECKING:
    from queuey.backends.rabbitmq._backend import Hold, RabbitMqBackend

__all__ = ["RabbitMqConsumer", "RabbitMqDelivery"]

log = logging.getLogger("queuey.rabbitmq")
_CANCEL_TIMEOUT = 5.0  # seconds to wait for the broker to confirm a basic.cancel


def _alive(message: AbstractIncomingMessage) -> bool:
    try:
        return not message.channel.is_closed
    except ChannelInvalidStateError:
        return False


async def _first(*waits: Awaitable[Any]) -> None:
    """Wait until the first of ``waits`` completes; cancel the others."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class RabbitMqConsumer:
    """Deliveries from one queue, at most ``prefetch`` unacknowledged (``basic.qos``).

    Args:
        backend: the backend whose connection it uses.
        config: the queue to consume.
    """

    def __init__(self, backend: RabbitMqBackend, config: QueueConfig) -> None:
        self.backend = backend
        self.config = config
        self.base = topology.broker_name(config.name, config.kind)
        self._buffer: asyncio.Queue[AbstractIncomingMessage | None] = asyncio.Queue()
        self._supervisor: asyncio.Task[None] | None = None
        self._channel: AbstractChannel | None = None
        self._consuming: tuple[AbstractQueue, str] | None = None
        self._stop_event = asyncio.Event()
        self._idle = False
        self._stopping = False
        self._aborted = False
        self._finished = False
        self._unsettled = 0
        self._window = AckWindow()

    async def next(self) -> Delivery | None:
        """The next delivery; ``None`` once ``stop`` was called and the buffer is drained.

        Raises:
            BackendError: the backend was closed underneath this consumer.
        """
        if self._supervisor is None and not self._stopping:
            self._supervisor = asyncio.create_task(
                self._supervise(), name=f"queuey-consumer:{self.base}"
            )
        while not self._finished:
            message = await self._buffer.get()
            if message is None:
                self._finished = True
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
        self._buffer.put_nowait(None)
        await self._close_if_drained()

    async def abort(self) -> None:
        """Stop at once because the backend is closing: ``next`` raises ``BackendError``."""
        self._aborted = not self._stopping
        self._stopping = True
        await self._end_supervisor()
        self._buffer.put_nowait(None)
        await close_quietly(self._channel)

    # -- settling bookkeeping (called by deliveries) ------------------------------------------

    async def release(self) -> None:
        """One handed-out delivery was settled (or given up on)."""
        self._unsettled -= 1
        await self._close_if_drained()

    async def _close_if_drained(self) -> None:
        if self._stopping and self._unsettled == 0 and self._buffer.qsize() <= 1:
            channel, self._channel = self._channel, None
            await close_quietly(channel)
            self.backend._forget(self)

    # -- receiving ----------------------------------------------------------------------------

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        self._window.received(message)
        if self._stopping:
            with contextlib.suppress(Exception):
                await message.nack(requeue=True)  # arrived after stop: back to the queue
            self._window.settled(message)
            return
        self._buffer.put_nowait(message)

    async def _deliver(self, message: AbstractIncomingMessage) -> Delivery | None:
        if not _alive(message):
            return None  # its channel died with the connection: the broker redelivers it
        try:
            envelope = Envelope.from_bytes(message.body)
        except MalformedEnvelopeError:
            await self._bury_malformed(message)
            self._window.settled(message)
            return None
        if envelope.kind == "topic" and not envelope.job_type:
            with contextlib.suppress(Exception):
                await message.ack()  # nobody subscribes: recorded as handled (seed 000)
            self._window.settled(message)
            return None
        self._unsettled += 1
        return RabbitMqDelivery(self, message, envelope, self._window)

    async def _bury_malformed(self, message: AbstractIncomingMessage) -> None:
        dead = topology.dead_name(self.base)
        log.error("malformed message on %s moved to %s", self.base, dead)
        try:
            await self.backend._send(dead, malformed_message(message.body, self.config.name), None)
            with translated(f"acknowledging a malformed message on {self.base!r}"):
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
        options = self.backend.options
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
        channel = self._channel = await self.backend._link.channel()
        self._window = AckWindow()  # delivery tags start again on a new channel
        with translated(f"consuming {self.base!r}"):
            await channel.set_qos(prefetch_count=self.config.prefetch)
            underlay = await channel.get_underlay_channel()
        cancelled = asyncio.Event()
        underlay.on_consumer_cancel_callbacks.add(lambda _frame: cancelled.set())
        while not self._stopping:
            cancelled.clear()
            await declare_queue(channel, self.config)  # re-creates a deleted queue
            with translated(f"consuming {self.base!r}"):
                queue = await channel.get_queue(self.base, ensure=False)
                tag = await queue.consume(self._on_message, consumer_tag=_consumer_tag(self.base))
            self._consuming = (queue, tag)
            self._idle = True
            try:
                await _first(channel.closed(), cancelled.wait(), self._stop_event.wait())
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
            queue, tag = consuming
            with contextlib.suppress(Exception):
                await queue.cancel(tag, timeout=_CANCEL_TIMEOUT)


def _consumer_tag(base: str) -> str:
    short = base.encode()[:160].decode(errors="ignore")
    return f"queuey.{short}.{uuid.uuid4().hex[:16]}"


class RabbitMqDelivery:
    """One message handed out by a ``RabbitMqConsumer``, settled exactly once."""

    def __init__(
        self,
        consumer: RabbitMqConsumer,
        message: AbstractIncomingMessage,
        envelope: Envelope,
        window: AckWindow,
    ) -> None:
        self._consumer = consumer
        self._message = message
        self._envelope = envelope
        self._window = window
        self._settled = False

    @property
    def envelope(self) -> Envelope:
        """The delivered envelope."""
        return self._envelope

    async def ack(self) -> None:
        """Acknowledge the message.

        Raises:
            BackendError: already settled, or the channel is gone (the job comes again).
        """
        await self._settle(None, None, None)

    async def retry(self, envelope: Envelope, delay: timedelta, error: str) -> None:
        """Publish ``envelope`` (the next attempt) through a hold queue for ``delay`` (or
        straight to the queue for zero), with ``error`` in an ``x-last-error`` header; then
        acknowledge.

        Raises:
            BackendError: already settled, the publish failed (the message is requeued), or
                the delay is too long for RabbitMQ (the job is dead-lettered instead).
        """
        await self._replace(envelope, delay, retry_headers(error))

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Publish ``envelope`` through a hold queue for ``delay``, then acknowledge.

        Raises:
            BackendError: as for ``retry``.
        """
        await self._replace(envelope, delay, {})

    async def dead_letter(self, reason: str) -> None:
        """Publish the envelope to ``q.dead`` with ``reason``, then acknowledge.

        Raises:
            BackendError: already settled, or the publish or the ack failed.
        """
        message = envelope_message(self._envelope, dead_headers(self._envelope, reason))
        await self._settle(topology.dead_name(self._consumer.base), message, None)

    async def release(self) -> None:
        """Hand the message back to its queue untouched (``basic.nack`` with requeue): it is
        delivered again, no attempt spent (graceful shutdown cancelled its handler).

        Raises:
            BackendError: already settled, or the nack failed (the broker redelivers the
                message when the channel closes anyway).
        """
        if self._settled:
            raise BackendError(f"delivery of job {self._envelope.job_id} already settled")
        self._settled = True
        try:
            if _alive(self._message):
                with translated(f"releasing job {self._envelope.job_id}"):
                    await self._message.nack(requeue=True)
        finally:
            self._window.settled(self._message)
            await self._consumer.release()

    async def _replace(self, envelope: Envelope, delay: timedelta, headers: dict[str, Any]) -> None:
        try:
            routing_key, hold = self._consumer.backend._route(
                envelope, delay, self._consumer.config
            )
        except ConfigError as exc:
            await self.dead_letter(f"cannot be scheduled: {exc}")
            raise BackendError(f"{exc}; the job was dead-lettered instead") from exc
        await self._settle(routing_key, envelope_message(envelope, headers), hold)

    async def _settle(
        self, routing_key: str | None, message: AbstractMessage | None, hold: Hold | None
    ) -> None:
        if self._settled:
            raise BackendError(f"delivery of job {self._envelope.job_id} already settled")
        self._settled = True
        try:
            if not _alive(self._message):
                raise BackendError(
                    f"the channel of job {self._envelope.job_id} was lost; "
                    "the broker will deliver it again"
                )
            if routing_key is not None and message is not None:
                await self._publish(routing_key, message, hold)
                with translated(f"acknowledging job {self._envelope.job_id}"):
                    await self._message.ack()
            else:
                with translated(f"acknowledging job {self._envelope.job_id}"):
                    await self._window.ack(self._message)  # coalesced with its neighbours
        finally:
            self._window.settled(self._message)
            await self._consumer.release()

    async def _publish(self, routing_key: str, message: AbstractMessage, hold: Hold | None) -> None:
        try:
            await self._consumer.backend._send(routing_key, message, hold)
        except BaseException as exc:
            # The original is still ours. Requeueing it would redeliver it at once, and a publish
            # that keeps failing (a refused declaration, an oversized message) would spin; the
            # broker dead-letters a rejected message into ``q.dead`` instead, where it stays for
            # a person. If the channel is gone, the broker redelivers it anyway.
            if _alive(self._message):
                log.error(
                    "could not publish the outcome of job %s (%s); moving it to the dead letters",
                    self._envelope.job_id,
                    exc,
                )
                with contextlib.suppress(Exception):
                    await self._message.reject(requeue=False)
            raise
