"""AMQP messages from envelopes and back: properties, headers and dead-letter reasons.

Every publish is persistent JSON with ``message_id`` = job id, ``type`` = job type (at most 255
bytes), ``priority`` = the envelope's priority (always set) and informational headers
``x-attempt`` and ``x-deferrals``; the body (the envelope) is the source of truth. Headers are
built afresh for every publish, so a republished message never carries the broker's
``x-death`` history and repeated trips through one hold queue are never taken for a
dead-letter cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aio_pika
from aio_pika.abc import AbstractMessage

from queuey._text import clean_text
from queuey.envelope import Envelope, MalformedEnvelopeError

__all__ = [
    "ATTEMPTS_HEADER",
    "DELIVERY_LIMIT_REASON",
    "LAST_ERROR_HEADER",
    "MALFORMED_REASON",
    "ORIGINAL_QUEUE_HEADER",
    "REASON_HEADER",
    "dead_headers",
    "dead_letter_of",
    "dead_reason",
    "envelope_message",
    "malformed_message",
    "retry_headers",
]

REASON_HEADER = "x-death-reason"
ORIGINAL_QUEUE_HEADER = "x-original-queue"
ATTEMPTS_HEADER = "x-attempts"
LAST_ERROR_HEADER = "x-last-error"
MALFORMED_REASON = "malformed envelope"
DELIVERY_LIMIT_REASON = (
    "worker lost on every delivery: the quorum queue's delivery limit (max_redeliveries) "
    "was reached (delivery_limit)"
)
_MAX_SHORTSTR = 255


def _truncate_utf8(text: str, limit: int) -> str:
    return text.encode()[:limit].decode(errors="ignore")


def envelope_message(
    envelope: Envelope, headers: Mapping[str, Any] | None = None
) -> aio_pika.Message:
    """The persistent AMQP message carrying ``envelope``.

    Args:
        envelope: what to send.
        headers: extra headers (dead-letter reason, last error), added to ``x-attempt`` and
            ``x-deferrals``.
    """
    return aio_pika.Message(
        envelope.to_bytes(),
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=envelope.job_id,
        type=_truncate_utf8(envelope.job_type, _MAX_SHORTSTR),
        priority=envelope.priority,
        headers={
            "x-attempt": envelope.attempt,
            "x-deferrals": envelope.deferrals,
            **(headers or {}),
        },
    )


def dead_headers(envelope: Envelope, reason: str) -> dict[str, Any]:
    """The headers of ``envelope``'s dead letter: reason, original queue, attempts."""
    return {
        REASON_HEADER: reason,
        ORIGINAL_QUEUE_HEADER: envelope.queue,
        ATTEMPTS_HEADER: envelope.attempt,
    }


def retry_headers(error: str) -> dict[str, Any]:
    """The headers of a retry: the failure text, cut to ``MAX_TEXT_BYTES`` UTF-8 bytes
    (``clean_text``)."""
    return {LAST_ERROR_HEADER: clean_text(error)}


def malformed_message(
    body: bytes,
    queue: str,
    reason: str = MALFORMED_REASON,
    original: AbstractMessage | None = None,
) -> aio_pika.Message:
    """A verbatim, persistent copy of a body that is not an envelope, for ``q.dead``.

    Args:
        body: the body, copied as is.
        queue: the queue it came from (``x-original-queue``).
        reason: why it is dead (``x-death-reason``): ``"malformed envelope: <what>"``.
        original: the message it came in; its id, headers and other properties are kept
            (except ``expiration``, so it stays in ``q.dead``, and ``user_id``, which the broker
            checks against the publishing connection).
    """
    if original is None:
        return aio_pika.Message(
            body,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            headers={REASON_HEADER: reason, ORIGINAL_QUEUE_HEADER: queue},
        )
    return aio_pika.Message(
        body,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        headers={**(original.headers or {}), REASON_HEADER: reason, ORIGINAL_QUEUE_HEADER: queue},
        content_type=original.content_type,
        content_encoding=original.content_encoding,
        priority=original.priority,
        correlation_id=original.correlation_id,
        reply_to=original.reply_to,
        message_id=original.message_id,
        timestamp=original.timestamp,
        type=original.type,
        app_id=original.app_id,
    )


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value if isinstance(value, str) else None


def dead_reason(headers: Mapping[str, Any]) -> str:
    """Why a message in ``q.dead`` is there.

    Our own ``x-death-reason`` header first; otherwise the reason of the broker's latest
    ``x-death`` entry (``"expired"`` for a message that outlived the queue's ``message_ttl``,
    ``"rejected"``, ``"maxlen"``; a quorum queue's ``"delivery_limit"`` is spelled out as
    ``DELIVERY_LIMIT_REASON``); otherwise ``"unknown"``.
    """
    reason = _text(headers.get(REASON_HEADER))
    if reason is not None:
        return reason
    deaths = headers.get("x-death")
    if isinstance(deaths, list | tuple) and deaths and isinstance(deaths[0], Mapping):
        broker = _text(deaths[0].get("reason"))
        if broker == "delivery_limit":
            return DELIVERY_LIMIT_REASON
        if broker is not None:
            return broker
    return "unknown"


def dead_letter_of(
    body: bytes, headers: Mapping[str, Any], message_id: str | None, queue: str
) -> tuple[Envelope, str]:
    """Read one message of ``q.dead`` as ``(envelope, reason)``.

    A body that is not an envelope (a malformed message copied verbatim) is shown as an
    envelope with an empty ``job_type``, ``attempt`` 1, the original queue, and the body's text
    as its payload, so operators still see it.
    """
    reason = dead_reason(headers)
    try:
        return Envelope.from_bytes(body), reason
    except MalformedEnvelopeError:
        original = _text(headers.get(ORIGINAL_QUEUE_HEADER)) or queue
        placeholder = Envelope(
            job_id=message_id or "",
            job_type="",
            queue=original,
            attempt=1,
            enqueued_at_ms=0,
            payload=body.decode(errors="replace"),
        )
        return placeholder, reason
