"""The envelope: the JSON wire format of one job, the same on every backend.

``{"job_id", "job_type", "queue", "attempt", "enqueued_at_ms", "deferrals", "priority",
"payload", "headers"}``. Unknown fields are ignored; ``deferrals``, ``priority`` and ``headers``
default when missing, so old envelopes decode.
"""

from __future__ import annotations

import os
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from queuey.errors import QueueyError

__all__ = [
    "PUBLISHED_BY",
    "Envelope",
    "Kind",
    "MalformedEnvelopeError",
    "new_job_id",
    "new_job_ids",
]

Kind = Literal["job", "topic"]
"""Which face of the engine a message belongs to: a typed job, or a topic message whose
``queue`` is the topic and whose ``job_type`` is the subscriber function's name."""

PUBLISHED_BY = "published_by"
"""The header carrying who published a topic message (a principal id; ``""`` for the app
itself); PostgreSQL keeps it in its own column."""


class MalformedEnvelopeError(QueueyError):
    """Bytes that are not a queuey envelope."""


def new_job_id() -> str:
    """A random (version 4) UUID in its canonical 36-character form.

    The same value as ``str(uuid.uuid4())`` at a third of its cost (about 1 µs), which counts
    when enqueuing thousands of jobs at once.
    """
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_job_ids(count: int) -> list[str]:
    """``count`` random (version 4) UUIDs as ``new_job_id`` makes them, from one
    ``os.urandom`` call (about 0.6 µs each: a bulk enqueue makes thousands at once)."""
    h = os.urandom(16 * count).hex()
    variant = "89ab89ab89ab89ab"  # the RFC 4122 variant of a random nibble (10xx)
    return [
        f"{h[i : i + 8]}-{h[i + 8 : i + 12]}-4{h[i + 13 : i + 16]}-"
        f"{variant[int(h[i + 16], 16)]}{h[i + 17 : i + 20]}-{h[i + 20 : i + 32]}"
        for i in range(0, 32 * count, 32)
    ]


_object_new = object.__new__
_set = object.__setattr__


class Envelope(BaseModel):
    """One job on the wire.

    Attributes:
        job_id: UUID string, stable across retries and deferrals.
        job_type: the job's name, also the handler dispatch key.
        queue: the fully qualified queue name.
        attempt: 1-based run number.
        enqueued_at_ms: Unix epoch milliseconds of the first enqueue.
        deferrals: how many times the job was deferred.
        priority: 0..255; a deferred job carries its queue's top priority.
        payload: the serialised job (any JSON value).
        headers: optional string headers (trace context; ``published_by`` for topics).
        kind: ``"job"`` (typed jobs) or ``"topic"``; a topic and a typed queue of the same
            name never collide. A topic envelope with an empty ``job_type`` (nobody subscribes)
            is recorded as handled and never delivered, so a publish to it still leaves a trace.
        redeliveries: how many of the runs counted in ``attempt`` ended with a lost worker
            (PostgreSQL leases); the retry policy judges ``attempt - redeliveries``.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    job_id: str
    job_type: str
    queue: str
    attempt: int = Field(ge=1)
    enqueued_at_ms: int = Field(ge=0)
    deferrals: int = Field(default=0, ge=0)
    priority: int = Field(default=0, ge=0, le=255)
    payload: Any = None
    headers: dict[str, str] = Field(default_factory=dict)
    kind: Kind = "job"
    redeliveries: int = Field(default=0, ge=0)

    @classmethod
    def new(
        cls,
        job_type: str,
        queue: str,
        payload: Any,
        *,
        priority: int = 0,
        headers: dict[str, str] | None = None,
        kind: Kind = "job",
    ) -> Envelope:
        """A first-attempt envelope with a fresh id, stamped with the current wall clock."""
        return cls(
            job_id=new_job_id(),
            job_type=job_type,
            queue=queue,
            attempt=1,
            enqueued_at_ms=time.time_ns() // 1_000_000,
            priority=priority,
            payload=payload,
            headers=headers or {},
            kind=kind,
        )

    @classmethod
    def trusted(
        cls,
        job_id: str,
        job_type: str,
        queue: str,
        attempt: int,
        enqueued_at_ms: int,
        deferrals: int,
        priority: int,
        payload: Any,
        headers: dict[str, str],
        kind: Kind,
        redeliveries: int = 0,
    ) -> Envelope:
        """An envelope of values queuey produced itself and already knows to be in range (a
        producer's fresh job, a row the database decoded), built without pydantic's
        validation: about a quarter of its cost, which counts once per job on the hot paths.
        Every field must be given, of its declared type; nothing is checked (use
        ``Envelope(...)`` or ``from_bytes`` for anything else). The result is an ordinary
        ``Envelope`` (equal to a validated one of the same values, copied and dumped alike).
        """
        envelope = _object_new(cls)
        _set(
            envelope,
            "__dict__",
            {
                "job_id": job_id,
                "job_type": job_type,
                "queue": queue,
                "attempt": attempt,
                "enqueued_at_ms": enqueued_at_ms,
                "deferrals": deferrals,
                "priority": priority,
                "payload": payload,
                "headers": headers,
                "kind": kind,
                "redeliveries": redeliveries,
            },
        )
        _set(envelope, "__pydantic_fields_set__", _ALL_FIELDS.copy())
        _set(envelope, "__pydantic_extra__", None)
        _set(envelope, "__pydantic_private__", None)
        return envelope

    def next_attempt(self) -> Envelope:
        """The envelope of the retry: attempt + 1, priority back to 0, deferrals kept."""
        return self.model_copy(update={"attempt": self.attempt + 1, "priority": 0})

    def deferred(self, priority: int) -> Envelope:
        """The envelope of a deferral: deferrals + 1 at ``priority``; attempt unchanged."""
        return self.model_copy(update={"deferrals": self.deferrals + 1, "priority": priority})

    def to_bytes(self) -> bytes:
        """Serialise to JSON bytes."""
        return self.model_dump_json().encode()

    @classmethod
    def from_bytes(cls, data: bytes | str) -> Envelope:
        """Decode JSON bytes.

        Raises:
            MalformedEnvelopeError: not JSON, or a required field missing or out of range; the
                message says what (``"malformed envelope: job_id: Field required"``).
        """
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            error = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(part) for part in error["loc"])
            what = f"{where}: {error['msg']}" if where else error["msg"]
            raise MalformedEnvelopeError(f"malformed envelope: {what}") from exc


_ALL_FIELDS = set(Envelope.model_fields)
