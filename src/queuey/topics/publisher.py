"""``TopicPublisher``: records a message once per subscriber of its topic, all or nothing
(every row, and the notification that wakes subscribers, in one transaction).

Each subscriber gets its own envelope (``kind="topic"``, ``queue`` = the topic, ``job_type`` =
the function), so each has its own retries. A topic nobody subscribes to is still recorded: one
envelope with an empty ``job_type``, which backends keep as handled and never deliver, so "why
didn't my handler run?" has an answer.

The payload is checked like a typed job's (``_payload``): JSON that every backend stores alike,
or a ``PayloadError`` naming the topic and the path inside the payload, before anything is
written. What is recorded is the value that JSON reads back as (a tuple is a list, an int key a
string), so every backend hands subscribers the same payload.

With an idempotency ``key`` (the HTTP ``Idempotency-Key`` header, a schedule's slot) the
publication is written only if the key was not used within ``[queues] idempotency_hours``;
otherwise nothing is written and the first publication is answered (``replayed``). The key is
scoped by the app's prefix, and remembered with a fingerprint of the topic and the payload:
the same key for another topic or payload is an ``IdempotencyConflictError``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from queuey._payload import topic_payload
from queuey._runtime.producer_base import check_priority, sending_for
from queuey.backends.base import Backend, UniqueBackend
from queuey.envelope import PUBLISHED_BY, Envelope
from queuey.errors import ConfigError
from queuey.queues import DEFAULT_MAX_PRIORITY, QueueConfig
from queuey.topics.config import QueuesConfig, topic_error
from queuey.topics.publication import IdempotencyConflictError, InvalidTopicError, Publication
from queuey.unique import IdempotencyKey

__all__ = ["MAX_KEY_CHARS", "TOPIC_MAX_PRIORITY", "TopicPublisher", "fingerprint"]

MAX_KEY_CHARS = 255
"""The longest idempotency key accepted."""

log = logging.getLogger("queuey.topics")

TOPIC_MAX_PRIORITY = DEFAULT_MAX_PRIORITY
"""The highest priority a topic message may be published with (PostgreSQL and memory hand a
topic's messages out by priority; topic queues are not RabbitMQ priority queues)."""


class TopicPublisher:
    """Publishes to the topics of one app (implements ``KeyedPublisher``).

    Args:
        config: the app's ``[queues]`` settings (who subscribes to what).
        backend: the transport.
        tracing: ``True`` (the global OpenTelemetry tracer provider) or a ``TracerProvider``:
            each publish is one PRODUCER span, parent of every subscriber's runs.
    """

    takes_idempotency_keys = True

    def __init__(self, config: QueuesConfig, backend: Backend, *, tracing: object = False) -> None:
        self.config = config
        self.backend = backend
        self.sending = sending_for(backend, tracing)

    async def publish(
        self,
        topic: str,
        payload: Any,
        published_by: str = "",
        *,
        priority: int = 0,
        connection: object | None = None,
        key: str | None = None,
    ) -> Publication:
        """Record ``payload`` once per subscriber of ``topic``, in one ``backend.publish``.

        Publishing does not depend on ``enabled``: a paused app still records messages.

        Args:
            topic: the topic; trimmed, then 1..200 letters, digits, ``. _ - :``.
            payload: any JSON value every backend stores alike: no NaN or infinity, no lone
                surrogate, integers of at most 640 digits, at most 100 levels deep.
            published_by: who publishes (a principal id), ``""`` for the app itself.
            priority: ``0..TOPIC_MAX_PRIORITY`` (default 0); higher is handled first.
            connection: (PostgreSQL) the caller's psycopg ``AsyncConnection``; the messages then
                commit or roll back with the caller's transaction.
            key: an idempotency key (1..255 characters): a second publish with the same key
                within ``idempotency_hours`` writes nothing and answers with the first
                publication (``replayed=True``).

        Returns:
            The publication: the first message's id, the trimmed topic, and how many
            subscribers it went to (0 is recorded too, and logged as a warning).

        Raises:
            InvalidTopicError: ``topic`` breaks the topic rule; nothing is written.
            ValueError: ``priority`` is out of range (the message names the topic and the
                range); nothing is written.
            PayloadError: ``payload`` is not JSON every backend stores alike; the message
                names the topic and the path (``payload.items[0]``); nothing is written.
            TypeError: ``published_by`` is not a string or ``priority`` not an int.
            ValueError: ``key`` is empty or longer than 255 characters.
            IdempotencyConflictError: ``key`` was used within the window for another topic
                or payload; nothing is written.
            ConfigError: a ``key`` on a backend without idempotency keys (RabbitMQ).
            BackendError: the backend failed; nothing is written.
        """
        name = _checked_topic(topic)
        check_priority(priority, QueueConfig(name, kind="topic", max_priority=TOPIC_MAX_PRIORITY))
        if not isinstance(published_by, str):
            raise TypeError(f"published_by must be a string, got {type(published_by).__name__}")
        payload = topic_payload(payload, name)
        subscribers = self.config.subscribers(name)
        headers = {PUBLISHED_BY: published_by}
        envelopes = [
            Envelope.new(
                subscriber, name, payload, priority=priority, headers=headers, kind="topic"
            )
            for subscriber in subscribers or ("",)
        ]
        with self.sending(envelopes):
            if key is not None:
                return await self._publish_once(name, payload, envelopes, key, connection)
            await self.backend.publish(envelopes, connection=connection)
        if not subscribers:
            log.warning(
                "published to topic %s, which nothing subscribes to (check [queues.subscribe])",
                name,
                extra={"topic": name, "message_id": envelopes[0].job_id},
            )
        return Publication(envelopes[0].job_id, name, len(subscribers))

    async def _publish_once(
        self,
        topic: str,
        payload: Any,
        envelopes: list[Envelope],
        key: str,
        connection: object | None,
    ) -> Publication:
        if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS:
            raise ValueError(f"an idempotency key has 1 to {MAX_KEY_CHARS} characters")
        if not isinstance(self.backend, UniqueBackend):
            raise ConfigError(
                f"idempotency keys need PostgreSQL or memory, not {type(self.backend).__name__}"
            )
        window = self.config.idempotency_hours * 3600.0
        once = IdempotencyKey(f"{self.config.prefix}:{key}", fingerprint(topic, payload), window)
        first = await self.backend.publish_once(envelopes, once, connection=connection)
        if first.fingerprint != once.fingerprint:
            raise IdempotencyConflictError(
                f"the idempotency key {key!r} was used for another topic or body "
                f"within the last {self.config.idempotency_hours} hour(s)"
            )
        delivered = len(first.ids) if self.config.subscribers(topic) else 0
        return Publication(first.ids[0], topic, delivered, replayed=not first.fresh)


def fingerprint(topic: str, payload: Any) -> str:
    """A hash of ``topic`` and ``payload`` (canonical JSON): what an idempotency key is
    checked against."""
    canonical = json.dumps([topic, payload], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _checked_topic(topic: object) -> str:
    if not isinstance(topic, str):
        raise InvalidTopicError(f"a topic must be a string, got {type(topic).__name__}")
    if not QueuesConfig.valid_topic(topic):
        raise InvalidTopicError(topic_error(topic))
    return topic.strip()
