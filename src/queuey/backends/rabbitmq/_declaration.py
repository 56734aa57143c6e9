"""Declaring a queue's topology on a channel, shared by the backend (``declare``), the router
(re-declaring after a reconnection) and consumers (re-creating a queue the broker cancelled
them from)."""

from __future__ import annotations

import asyncio
import contextlib

from aio_pika.abc import AbstractChannel

from queuey.backends.rabbitmq import _topology as topology
from queuey.backends.rabbitmq._errors import declaring, translated
from queuey.queues import QueueConfig

__all__ = ["close_quietly", "declare_queue"]

_CLOSE_TIMEOUT = 5.0  # seconds to wait for the broker to confirm a channel.close


async def declare_queue(
    channel: AbstractChannel, config: QueueConfig, quorum: topology.Quorum | None = None
) -> None:
    """Declare ``config``'s dead-letter queue, then its main queue, on ``channel``: classic
    queues, or quorum queues when ``quorum`` is given.

    The dead-letter queue comes first: the main queue dead-letters expired messages into it.

    Raises:
        BackendError: the broker refused (the channel is then closed); for an existing queue
            with other arguments, or of the other type (classic or quorum), the message names
            it and says what to do.
    """
    base = topology.broker_name(config.name, config.kind)
    what = f"declaring queue {base!r}"
    with translated(what), declaring(what, quorum is not None):
        await channel.declare_queue(
            topology.dead_name(base),
            durable=True,
            arguments=dict(topology.dead_arguments(quorum)),
        )
        await channel.declare_queue(
            base,
            durable=config.durable,
            arguments=dict(topology.main_arguments(config, quorum)),
        )


async def close_quietly(channel: AbstractChannel | None) -> None:
    """Close ``channel`` if it is open, ignoring failures (it may be dying already), waiting
    at most a few seconds for a broker that does not answer."""
    if channel is not None and not channel.is_closed:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_CLOSE_TIMEOUT):
                await channel.close()
