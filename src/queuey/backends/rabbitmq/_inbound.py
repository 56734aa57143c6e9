"""``Inbound``: one message as the broker delivered it, and the settles a consumer sends for it.

A consumer registers with aiormq's ``basic_consume`` (the AMQP client under aio-pika) and gets
aiormq's ``DeliveredMessage``: the ``basic.deliver`` frame, the content header pamqp already
decoded, and the body. aio-pika's ``Queue.consume`` would wrap each one in an
``IncomingMessage``, copying every property through a locked ``__setattr__``, and run the
callback in a second task; on a no-op drain that was about 15% of the worker's CPU
(``python -m bench.profile queuey-rabbitmq drain``, docs/benchmarks.md round 7). ``Inbound``
reads what the worker needs (body, delivery tag, message id) and sends ``basic.ack``,
``basic.nack`` and ``basic.reject`` on the channel the message came on, as aio-pika does; the
full property set is built only for the rare malformed message copied to ``q.dead``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, cast

from aio_pika import IncomingMessage
from aio_pika.abc import AbstractIncomingMessage
from aiormq.abc import AbstractChannel, DeliveredMessage

if TYPE_CHECKING:
    from pamqp.commands import Basic

__all__ = ["Inbound"]


class Inbound:
    """One delivered message.

    Attributes:
        body: the message body, as sent.
        delivery_tag: its tag on ``channel`` (AMQP 0-9-1: unique and increasing per channel).
        channel: the aiormq channel it came on, where it must be settled.
    """

    __slots__ = ("_delivered", "body", "channel", "delivery_tag")

    def __init__(self, delivered: DeliveredMessage) -> None:
        self._delivered = delivered
        self.body = delivered.body
        self.channel: AbstractChannel = delivered.channel
        deliver = cast("Basic.Deliver", delivered.delivery)  # a consumer gets basic.deliver only
        self.delivery_tag: int = deliver.delivery_tag or 0

    @property
    def message_id(self) -> str | None:
        """The ``message_id`` property (queuey puts the job id there), if any."""
        return self._delivered.header.properties.message_id

    def alive(self) -> bool:
        """Whether the channel it came on is still open, so that it can still be settled."""
        return not self.channel.is_closed

    def ack(self, multiple: bool = False) -> Awaitable[None]:
        """``basic.ack`` of this delivery (``multiple``: and every earlier one on the channel).

        Raises (when awaited):
            aiormq.exceptions.ChannelInvalidStateError: the channel is closed.
        """
        return self.channel.basic_ack(self.delivery_tag, multiple=multiple)

    def nack(self, requeue: bool = True) -> Awaitable[None]:
        """``basic.nack`` of this delivery: back to its queue with ``requeue``, else to its
        dead-letter exchange.

        Raises (when awaited):
            aiormq.exceptions.ChannelInvalidStateError: the channel is closed.
        """
        return self.channel.basic_nack(self.delivery_tag, requeue=requeue)

    def reject(self, requeue: bool = False) -> Awaitable[None]:
        """``basic.reject`` of this delivery (as ``nack``, one message).

        Raises (when awaited):
            aiormq.exceptions.ChannelInvalidStateError: the channel is closed.
        """
        return self.channel.basic_reject(self.delivery_tag, requeue=requeue)

    def properties(self) -> AbstractIncomingMessage:
        """Every property and header, as aio-pika reads them (built on each call: for the
        rare message that is copied elsewhere)."""
        return IncomingMessage(self._delivered, no_ack=True)
