"""The parameters of the publish statements, built from envelopes.

Three statements insert rows (``queries.sql``): ``publish_job`` for the most common enqueue (one
first-attempt typed job, due now, no headers, no message TTL: only what varies is sent, every
other column takes its default), ``publish_one`` for any other single envelope, and ``publish``
for several (one array per column as a literal, payloads and headers as one JSON array each).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from queuey.backends.postgres._arrays import number_array, text_array
from queuey.envelope import Envelope, Kind

__all__ = ["SingleQuery", "TtlOf", "bulk_params", "single_params"]

TtlOf = Callable[[Kind, str], float | None]
"""The message TTL of a (kind, queue), in seconds, or ``None``."""

SingleQuery = Literal["publish_job", "publish_one"]
"""The statements that insert one row."""


def single_params(
    envelope: Envelope, delay: float, ttl_of: TtlOf, channel: str
) -> tuple[SingleQuery, dict[str, Any]]:
    """The statement name for one envelope and its parameters.

    Args:
        envelope: the envelope.
        delay: seconds until it is due.
        ttl_of: the queues' message TTLs.
        channel: the NOTIFY channel.
    """
    ttl = ttl_of(envelope.kind, envelope.queue)
    params: dict[str, Any] = {
        "id": envelope.job_id,
        "queue": envelope.queue,
        "job_type": envelope.job_type,
        "priority": envelope.priority,
        "payload": json.dumps(envelope.payload),
        "enqueued_at_ms": envelope.enqueued_at_ms,
        "channel": channel,
    }
    plain = envelope.kind == "job" and envelope.attempt == 1 and not envelope.deferrals
    if plain and not envelope.headers and not delay and ttl is None:
        return "publish_job", params
    params.update(
        kind=envelope.kind,
        attempt=envelope.attempt,
        deferrals=envelope.deferrals,
        headers=json.dumps(envelope.headers),
        published_by=envelope.headers.get("published_by", ""),
        ttl=ttl,
        delay=delay,
    )
    return "publish_one", params


def bulk_params(
    envelopes: Sequence[Envelope], delay: float, ttl_of: TtlOf, channel: str
) -> dict[str, Any]:
    """The parameters of ``publish`` for several envelopes (arguments as for
    ``single_params``)."""
    ttls: dict[tuple[Kind, str], float | None] = {}
    for e in envelopes:
        if (e.kind, e.queue) not in ttls:
            ttls[e.kind, e.queue] = ttl_of(e.kind, e.queue)
    return {
        "ids": text_array([e.job_id for e in envelopes]),
        "kinds": text_array([e.kind for e in envelopes]),
        "queues": text_array([e.queue for e in envelopes]),
        "job_types": text_array([e.job_type for e in envelopes]),
        "priorities": number_array([e.priority for e in envelopes]),
        "attempts": number_array([e.attempt for e in envelopes]),
        "deferrals": number_array([e.deferrals for e in envelopes]),
        "payloads": json.dumps([e.payload for e in envelopes]),
        "headers": json.dumps([e.headers for e in envelopes]),
        "published_by": text_array([e.headers.get("published_by", "") for e in envelopes]),
        "enqueued_at_ms": number_array([e.enqueued_at_ms for e in envelopes]),
        "ttls": number_array([ttls[e.kind, e.queue] for e in envelopes]),
        "delay": delay,
        "channel": channel,
    }
