"""The result of a publish, and the protocol the HTTP endpoint publishes through."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

from queuey.errors import QueueyError

__all__ = ["InvalidTopicError", "Publication", "Publisher"]


class InvalidTopicError(QueueyError, ValueError):
    """A topic that breaks seed ``000``'s rule: 1..200 characters after trimming, each an ASCII
    letter or digit or one of ``. _ - :``."""


@dataclass(frozen=True)
class Publication:
    """What a publish recorded (seed ``000``, SEEDS-DIGEST §1.6).

    Attributes:
        id: the id (UUID string) of the first row written; for a topic nobody subscribes to,
            the id of the one handled row that records the publish.
        topic: the trimmed topic.
        delivered: the number of subscribers (0 is not an error).
    """

    id: str
    topic: str
    delivered: int

    def as_json(self) -> dict[str, Any]:
        """``{"id": ..., "topic": ..., "delivered": N}``."""
        return asdict(self)


class Publisher(Protocol):
    """Anything that publishes to topics."""

    async def publish(
        self, topic: str, payload: Any, published_by: str = "", *, priority: int = 0
    ) -> Publication:
        """Record ``payload`` once per subscriber of ``topic``, all or nothing, at
        ``priority`` (``0..TOPIC_MAX_PRIORITY``; higher is handled first).

        Raises:
            InvalidTopicError: ``topic`` breaks the topic rule; nothing is written.
            ValueError: ``priority`` is out of range; nothing is written.
            PayloadError: ``payload`` is not JSON every backend stores alike (NaN, a lone
                surrogate...); the message names the topic and the path inside the payload;
                nothing is written.
            BackendError: the database failed; nothing is written.
        """
        ...
