"""``RabbitMqDelivery``: one message handed out by a consumer, settled exactly once.

A delivery publishes before it acknowledges (a retry, deferral or dead letter is confirmed by
the broker before the original is acked), so a failure in between yields a duplicate, never a
loss. A delivery whose channel died with the connection cannot be settled: its settle raises
``BackendError`` at once (the broker redelivers the job), without publishing a duplicate first.
Every settle is bounded by ``publish_timeout`` in total (its publish, hold declaration and ack
share one deadline), so a worker never waits longer than that on a broker that stopped
answering.

Plain acks go through the channel's ``AckWindow``: one ``basic.ack(multiple)`` for the
deliveries handled in order, so a drain sends a fraction of the frames.

What the deliveries of one consumer share (its queue, the router they publish through, the
hook that tells the consumer a delivery is settled) is one ``Origin``, so a delivery never
holds its consumer.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from aio_pika.abc import AbstractMessage

from queuey.attempts import AttemptError
from queuey.backends.rabbitmq._acks import AckWindow
from queuey.backends.rabbitmq._inbound import Inbound
from queuey.backends.rabbitmq._router import Hold, Router
from queuey.backends.rabbitmq._wire import dead_headers, envelope_message, retry_headers
from queuey.envelope import Envelope
from queuey.errors import BackendError, ConfigError
from queuey.queues import QueueConfig

__all__ = ["Origin", "RabbitMqDelivery", "hand_back"]

log = logging.getLogger("queuey.rabbitmq")


@dataclass(frozen=True)
class Origin:
    """What every delivery of one consumer shares.

    Attributes:
        config: the consumed queue.
        dead: its dead-letter queue on the broker.
        router: publishes retries, deferrals and dead letters.
        settled: awaited once per delivery after it is settled (or given up on).
    """

    config: QueueConfig
    dead: str
    router: Router
    settled: Callable[[], Awaitable[None]]


class RabbitMqDelivery:
    """One message handed out by a ``RabbitMqConsumer``, settled exactly once."""

    def __init__(
        self,
        origin: Origin,
        message: Inbound,
        envelope: Envelope,
        window: AckWindow,
    ) -> None:
        self._origin = origin
        self._message = message
        self._envelope = envelope
        self._window = window
        self._settled = False

    @property
    def envelope(self) -> Envelope:
        """The delivered envelope."""
        return self._envelope

    @property
    def cancel_requested(self) -> None:
        """RabbitMQ cannot reach a running job: never cancelled."""
        return None

    @property
    def lease_lost(self) -> bool:
        """Always false: RabbitMQ has no leases (a lost channel redelivers the message)."""
        return False

    def held_for(self, delay: timedelta) -> timedelta:
        """How long a retry or deferral after ``delay`` is really held: rounded up to the
        backend's hold granularity (what the outcome log reports)."""
        return self._origin.router.held_for(delay)

    async def cancelled(self) -> None:
        """Drop the message (acknowledge it): never called, as nothing cancels it.

        Raises:
            BackendError: as for ``ack``.
        """
        await self._settle(None, None, None)

    async def ack(self, result: str | None = None) -> None:
        """Acknowledge the message. A ``result`` is dropped: RabbitMQ keeps no per-job state
        (a producer on it refuses to enqueue a job that declares a result type).

        Raises:
            BackendError: already settled, or the channel is gone (the job comes again).
        """
        await self._settle(None, None, None)

    async def retry(
        self,
        envelope: Envelope,
        delay: timedelta,
        error: str,
        failure: AttemptError | None = None,
    ) -> None:
        """Publish ``envelope`` (the next attempt) through a hold queue for ``delay`` (or
        straight to the queue for zero), with ``error`` in an ``x-last-error`` header; then
        acknowledge. RabbitMQ keeps no history of attempt errors (``failure`` is not stored;
        the worker's log has each one, with its traceback).

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

    async def dead_letter(self, reason: str, failure: AttemptError | None = None) -> None:
        """Publish the envelope to ``q.dead`` with ``reason``, then acknowledge (``failure``:
        as for ``retry``).

        Raises:
            BackendError: already settled, or the publish or the ack failed.
        """
        message = envelope_message(self._envelope, dead_headers(self._envelope, reason))
        await self._settle(self._origin.dead, message, None)

    async def release(self) -> None:
        """Hand the message back to its queue untouched: it is delivered again, no attempt
        spent (graceful shutdown cancelled its handler). See ``hand_back``.

        Raises:
            BackendError: already settled, or the nack failed (the broker redelivers the
                message when the channel closes anyway).
        """
        if self._settled:
            raise BackendError(f"delivery of job {self._envelope.job_id} already settled")
        self._settled = True
        try:
            if self._message.alive():
                await hand_back(self._message, self._origin.router, self._envelope)
        finally:
            self._window.settled(self._message)
            await self._origin.settled()

    async def _replace(self, envelope: Envelope, delay: timedelta, headers: dict[str, Any]) -> None:
        try:
            routing_key, hold = self._origin.router.route(envelope, delay, self._origin.config)
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
        router = self._origin.router
        deadline = router.deadline()  # one bound for the whole settle: publish, then ack
        try:
            if not self._message.alive():
                raise BackendError(
                    f"the channel of job {self._envelope.job_id} was lost; "
                    "the broker will deliver it again"
                )
            if routing_key is not None and message is not None:
                await self._publish(routing_key, message, hold, deadline)
                async with router.bounded(self._acking(), deadline):
                    await self._message.ack()
            else:  # coalesced with its neighbours; the window bounds each flush by deadline
                try:
                    await self._window.ack(self._message, deadline)
                except TimeoutError:
                    raise router.unreachable(self._acking()) from None
                except Exception:
                    with router.translating(self._acking()):
                        raise
        finally:
            self._window.settled(self._message)
            await self._origin.settled()

    def _acking(self) -> str:
        """What the settle's ack is, for its errors."""
        return f"acknowledging job {self._envelope.job_id}"

    async def _publish(
        self, routing_key: str, message: AbstractMessage, hold: Hold | None, deadline: float
    ) -> None:
        try:
            await self._origin.router.send(routing_key, message, hold, deadline)
        except BaseException as exc:
            # The original is still ours. Requeueing it would redeliver it at once, and a publish
            # that keeps failing (a refused declaration, an oversized message) would spin; the
            # broker dead-letters a rejected message into ``q.dead`` instead, where it stays for
            # a person. If the channel is gone, the broker redelivers it anyway.
            if self._message.alive():
                log.error(
                    "could not publish the outcome of job %s (%s); moving it to the dead letters",
                    self._envelope.job_id,
                    exc,
                )
                with contextlib.suppress(Exception):
                    await self._message.reject(requeue=False)
            raise


async def hand_back(message: Inbound, router: Router, envelope: Envelope | None) -> None:
    """Return ``message`` (carrying ``envelope``, if it is one) to its queue, all within
    ``publish_timeout``.

    On classic queues (or without an envelope) it is a ``basic.nack`` with requeue. On quorum
    queues a nack counts as a delivery against ``x-delivery-limit``, so a job handed back by a
    shutdown or a pause would be dead-lettered after a few of them without ever failing: the
    envelope is published again to the end of its queue (confirmed), then the original is
    acknowledged. If that publish fails, the message is nacked after all (never lost).

    Raises:
        BackendError: the nack or the ack failed (the broker redelivers the message when the
            channel closes anyway), or the broker did not answer in time.
    """
    deadline = router.deadline()
    what = "handing back job " + (envelope.job_id if envelope is not None else "?")
    if router.quorum is not None and envelope is not None:
        key, _ = router.route(envelope, None)
        try:
            await router.send(key, envelope_message(envelope), deadline=deadline)
        except Exception as exc:
            log.warning("%s: could not publish it again (%s); requeueing it", what, exc)
        else:
            async with router.bounded(what, deadline):
                await message.ack()
            return
    async with router.bounded(what, deadline):
        await message.nack(requeue=True)
