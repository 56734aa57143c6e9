"""Looking into broker queues without changing them (counts, dead letters) and emptying them,
each on a throwaway channel: a missing queue closes the channel with NOT_FOUND, which reads
as empty."""

from __future__ import annotations

from aio_pika.abc import AbstractChannel
from aio_pika.exceptions import ChannelNotFoundEntity

from queuey.backends.rabbitmq._errors import translated
from queuey.backends.rabbitmq._wire import dead_letter_of
from queuey.envelope import Envelope
from queuey.errors import BackendError

__all__ = ["count_ready", "purge_queue", "read_dead"]

_GET_TIMEOUT = 10.0  # seconds for one basic.get


def _missing(exc: BackendError) -> bool:
    return isinstance(exc.__cause__, ChannelNotFoundEntity)


async def count_ready(channel: AbstractChannel, name: str) -> int:
    """Messages ready in broker queue ``name`` (0 if it does not exist).

    Raises:
        BackendError: the broker could not be asked.
    """
    try:
        with translated(f"counting messages in {name!r}"):
            declared = await channel.declare_queue(name, passive=True)
    except BackendError as exc:
        if _missing(exc):
            return 0
        raise
    return int(declared.declaration_result.message_count or 0)


async def read_dead(
    channel: AbstractChannel, dead: str, queue: str, limit: int
) -> list[tuple[Envelope, str]]:
    """Up to ``limit`` messages of ``dead`` (the dead-letter queue of logical ``queue``),
    fetched unacknowledged: closing ``channel`` afterwards puts them back in place.

    Raises:
        BackendError: the broker could not be read.
    """
    letters: list[tuple[Envelope, str]] = []
    try:
        with translated(f"reading {dead!r}"):
            source = await channel.get_queue(dead, ensure=False)
            while len(letters) < limit:
                message = await source.get(no_ack=False, fail=False, timeout=_GET_TIMEOUT)
                if message is None:
                    break
                headers = dict(message.headers or {})
                letters.append(dead_letter_of(message.body, headers, message.message_id, queue))
    except BackendError as exc:
        if not _missing(exc):
            raise
    return letters


async def purge_queue(channel: AbstractChannel, name: str) -> int:
    """Empty broker queue ``name``; returns how many messages went (0 if it does not exist).

    Raises:
        BackendError: the broker refused.
    """
    try:
        with translated(f"purging {name!r}"):
            queue = await channel.get_queue(name, ensure=True)
            result = await queue.purge()
    except BackendError as exc:
        if _missing(exc):
            return 0
        raise
    return int(result.message_count or 0)
