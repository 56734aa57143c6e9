"""Test doubles for the HTTP endpoint: publishers that record rows, tokens, keys and clients.

``RecordingPublisher`` follows the ``Publisher`` contract with seed ``000``'s rules: the topic is
trimmed and validated (1..200 of ``A-Za-z0-9._:-``), one row is written per subscriber (one
handled row when nobody subscribes), and, like ``TopicPublisher`` and the envelope encoder, a
payload with NaN, an infinity or a lone surrogate raises (``TypeError``/``UnicodeEncodeError``,
which the endpoint would answer 500) with nothing written.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
from starlette.types import ASGIApp

from queuey.errors import BackendError, BackendUnavailableError
from queuey.http import (
    AccessPolicy,
    ApiKeyConfig,
    HttpConfig,
    JwtConfig,
    api_key_digest,
    publish_app,
)
from queuey.topics.publication import InvalidTopicError, Publication

SECRET = "s3cret-s3cret-s3cret-s3cret-s3cret!"
AUDIENCE = "queuey"
OPS_KEY = "qk_ops_0123456789abcdef"
STAFF_KEY = "qk_staff_0123456789abcdef"
_TOPIC = re.compile(r"[A-Za-z0-9._:-]{1,200}")


@dataclass(frozen=True)
class Row:
    """One recorded row."""

    topic: str
    subscriber: str
    payload: Any
    published_by: str


def check_topic(topic: str) -> str:
    """Seed ``000``'s rule; returns the trimmed topic or raises ``InvalidTopicError``."""
    trimmed = topic.strip()
    if not _TOPIC.fullmatch(trimmed):
        raise InvalidTopicError(
            f"`{trimmed}` is not a topic: use 1 to 200 letters, digits, `.`, `_`, `-` or `:`"
        )
    return trimmed


@dataclass
class RecordingPublisher:
    """A ``Publisher`` that appends rows to ``rows``."""

    subscribe: Mapping[str, Sequence[str]] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)

    async def publish(
        self, topic: str, payload: Any, published_by: str = "", *, priority: int = 0
    ) -> Publication:
        trimmed = check_topic(topic)
        _check_storable(payload)
        subscribers = list(self.subscribe.get(trimmed, ())) or [""]
        self.rows.extend(Row(trimmed, name, payload, published_by) for name in subscribers)
        delivered = len(self.subscribe.get(trimmed, ()))
        return Publication(id=str(uuid.uuid4()), topic=trimmed, delivered=delivered)


@dataclass
class FailingPublisher:
    """A ``Publisher`` whose database fails: valid topics fail with ``BackendError`` (with
    ``unreachable``, the ``BackendUnavailableError`` of a database that cannot be reached)."""

    rows: list[Row] = field(default_factory=list)
    unreachable: bool = False

    async def publish(
        self, topic: str, payload: Any, published_by: str = "", *, priority: int = 0
    ) -> Publication:
        check_topic(topic)
        if self.unreachable:
            raise BackendUnavailableError(
                "PostgreSQL at 127.0.0.1:5432 is unreachable: no connection after trying for "
                "5s (publish_timeout); nothing was written"
            )
        raise BackendError("connection to server at 127.0.0.1:5432 refused")


def _check_storable(payload: Any) -> None:
    try:
        json.dumps(payload, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except ValueError as exc:
        raise TypeError(f"the payload is not JSON: {exc}") from None


def token(
    *,
    sub: str | None = "alice",
    roles: Any = ("member",),
    aud: str | None = AUDIENCE,
    exp_in: float | None = 86400.0,
    key: Any = SECRET,
    algorithm: str = "HS256",
    **claims: Any,
) -> str:
    """A signed JWT (valid for a day unless ``exp_in`` says otherwise: module-level tokens must
    outlive a long test run); pass ``None`` to leave a claim out."""
    payload: dict[str, Any] = dict(claims)
    for name, value in (("sub", sub), ("aud", aud)):
        if value is not None:
            payload[name] = value
    if roles is not None:
        payload["roles"] = roles if isinstance(roles, str) else list(roles)
    if exp_in is not None:
        payload["exp"] = int(time.time() + exp_in)
    return jwt.encode(payload, key, algorithm=algorithm)


def bearer(value: str) -> dict[str, str]:
    """The ``Authorization`` header for a bearer token."""
    return {"Authorization": f"Bearer {value}"}


def http_config(*, base: str = "", max_body_bytes: int = 1024) -> HttpConfig:
    """A config accepting HS256 tokens and two API keys (ops-bot: ops; staff-bot: staff org)."""
    return HttpConfig(
        base=base,
        max_body_bytes=max_body_bytes,
        jwt=JwtConfig(audience=AUDIENCE, secret=SECRET),
        api_keys=(
            ApiKeyConfig(id="ops-bot", sha256=api_key_digest(OPS_KEY), roles=frozenset({"ops"})),
            ApiKeyConfig(
                id="staff-bot",
                sha256=api_key_digest(STAFF_KEY),
                org="acme",
                org_class="staff",
            ),
        ),
    )


def app_for(
    publish: str,
    publisher: Any | None = None,
    *,
    config: HttpConfig | None = None,
) -> tuple[ASGIApp, RecordingPublisher]:
    """The app for ``[queues] publish = publish``, with a recording publisher by default."""
    recorder = publisher if publisher is not None else RecordingPublisher()
    app = publish_app(config or http_config(), recorder, AccessPolicy.parse(publish))
    return app, recorder


def client(app: ASGIApp) -> httpx.AsyncClient:
    """An httpx client calling ``app`` in process."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://queuey")
