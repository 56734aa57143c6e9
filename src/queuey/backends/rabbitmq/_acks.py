"""Acks of one channel coalesced into ``basic.ack(multiple=True)`` where delivery order allows.

A worker acks deliveries as their handlers return, and with many in flight most return in the
order they arrived. ``AckWindow`` remembers every delivery tag the broker sent on the channel,
in order, with its state: still out (being handled or waiting in the buffer), waiting for a
coalesced ack, or settled some other way (nacked, rejected, acked on its own). Once per event
loop iteration it acks the longest settled prefix with one frame, ``multiple`` up to the
highest tag of that prefix that waits for an ack: RabbitMQ then acknowledges every outstanding
delivery up to that tag, and the prefix holds no delivery still out, so nothing unhandled is
ever acknowledged. An ack that the prefix cannot cover (a lower delivery is still being
handled) is sent on its own in the same iteration, so a slow job never holds back the others.

Each ack carries the deadline of its settle (``publish_timeout`` from its start); a frame is
sent within the earliest deadline of the acks it carries, or they all fail with
``TimeoutError``: one timer per frame, not one per ack.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass

from queuey.backends.rabbitmq._inbound import Inbound

__all__ = ["AckWindow"]

_OUT = 0  # being handled, or waiting in the buffer
_ACK = 1  # handled; its ack waits for this iteration's flush
_SETTLED = 2  # acked, nacked or rejected on its own


@dataclass(slots=True)
class _Entry:
    message: Inbound
    tag: int
    state: int = _OUT
    future: asyncio.Future[None] | None = None
    deadline: float = 0.0


class AckWindow:
    """The delivery tags of one channel and the acks waiting to be sent on it."""

    def __init__(self) -> None:
        self._tags: dict[int, _Entry] = {}  # by delivery tag
        self._order: deque[_Entry] = deque()  # in delivery order (tags only grow on a channel)
        self._waiting: list[_Entry] = []  # handled, their ack not sent yet
        self._flushing: asyncio.Task[None] | None = None

    def received(self, message: Inbound) -> None:
        """The broker delivered ``message`` on this channel (call before anything else)."""
        tag = message.delivery_tag
        entry = self._tags[tag] = _Entry(message, tag)
        self._order.append(entry)

    def settled(self, message: Inbound) -> None:
        """``message`` was acked, nacked or rejected on its own (or given up on)."""
        entry = self._tags.get(message.delivery_tag)
        if entry is not None and entry.state != _ACK:
            entry.state = _SETTLED
            self._drop_settled_prefix()

    async def ack(self, message: Inbound, deadline: float) -> None:
        """Acknowledge ``message``, coalesced with the other acks of this iteration, by
        ``deadline`` (event-loop time).

        Raises:
            TimeoutError: the ack was not sent by ``deadline``.
            Exception: whatever the channel raised while sending the ack.
        """
        entry = self._tags.get(message.delivery_tag)
        if entry is None or entry.state != _OUT:  # not tracked here: ack it on its own
            async with asyncio.timeout_at(deadline):
                await message.ack()
            return
        entry.state = _ACK
        entry.deadline = deadline
        future = entry.future = asyncio.get_running_loop().create_future()
        self._waiting.append(entry)
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush())
        await future

    async def _flush(self) -> None:
        while self._waiting:
            await asyncio.sleep(0)  # the acks of this iteration join in
            await self._flush_once()

    async def _flush_once(self) -> None:
        waiting, self._waiting = self._waiting, []
        top: _Entry | None = None
        covered: list[_Entry] = []
        tags, order = self._tags, self._order
        while order and order[0].state != _OUT:  # the prefix up to the first delivery still out
            entry = order.popleft()
            del tags[entry.tag]
            if entry.state == _ACK:
                entry.state = _SETTLED
                top = entry
                covered.append(entry)
        if top is not None:
            await _send(top.message.ack(multiple=True), covered)
        for entry in waiting:  # behind a delivery still out: each on its own
            if entry.state == _ACK:
                entry.state = _SETTLED
                await _send(entry.message.ack(), [entry])
        self._drop_settled_prefix()

    def _drop_settled_prefix(self) -> None:
        tags, order = self._tags, self._order
        while order and order[0].state == _SETTLED:
            del tags[order.popleft().tag]


async def _send(ack: Awaitable[None], entries: list[_Entry]) -> None:
    try:
        async with asyncio.timeout_at(min(entry.deadline for entry in entries)):
            await ack
    except Exception as exc:
        for entry in entries:
            if entry.future is not None and not entry.future.done():
                entry.future.set_exception(exc)
        return
    for entry in entries:
        if entry.future is not None and not entry.future.done():
            entry.future.set_result(None)
