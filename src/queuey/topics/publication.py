"""The result of a publish, and the protocol the HTTP endpoint publishes through."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from queuey.errors import QueueyError

__all__ = [
    "IdempotencyConflictError",
    "InvalidTopicError",
    "KeyedPublisher",
    "Publication",
    "Publisher",
]


class InvalidTopicError(QueueyError, ValueError):
    """A topic that breaks the topic rule: 1..200 characters after trimming, each an ASCII
    letter or digit or one of ``. _ - :``."""


class IdempotencyConflictError(QueueyError, ValueError):
    """An idempotency key used within its window for another topic or body (the HTTP endpoint
    answers 409)."""


@dataclass(frozen=True)
class Publication:
    """What a publish recorded.

    Attributes:
        id: the id (UUID string) of the first row written; for a topic nobody subscribes to,
            the id of the one handled row that records the publish.
        topic: the trimmed topic.
        delivered: the number of subscribers (0 is not an error).
        replayed: ``True`` when an idempotency key was already used within its window: nothing
            was written, and this is the first publication (its id).
    """

    id: str
    topic: str
    delivered: int
    replayed: bool = False

    def as_json(self) -> dict[str, Any]:
        """``{"id": ..., "topic": ..., "delivered": N}``."""
        return {"id": self.id, "topic": self.topic, "delivered": self.delivered}


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


@runtime_checkable
class KeyedPublisher(Publisher, Protocol):
    """A publisher that also takes an idempotency key (``TopicPublisher``); the HTTP endpoint
    honours the ``Idempotency-Key`` header only through one.

    Attributes:
        takes_idempotency_keys: always ``True`` (marks the capability).
    """

    takes_idempotency_keys: bool

    async def publish(
        self,
        topic: str,
        payload: Any,
        published_by: str = "",
        *,
        priority: int = 0,
        key: str | None = None,
    ) -> Publication:
        """As ``Publisher.publish``; with ``key``, only if the key was not used within the
        app's window (else the first publication, ``replayed=True``).

        Raises:
            InvalidTopicError: ``topic`` breaks the topic rule; nothing is written.
            ValueError: ``key`` is empty or too long.
            IdempotencyConflictError: ``key`` was used for another topic or body.
            BackendError: the database failed; nothing is written.
        """
        ...
