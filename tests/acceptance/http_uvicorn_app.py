"""The publish app a real uvicorn process serves in ``test_http_uvicorn.py``.

Configured from the environment: ``QUEUEY_TEST_PUBLISH`` (the access string),
``QUEUEY_TEST_JWT_SECRET`` (HS256 secret, audience ``queuey``) and ``QUEUEY_TEST_ROWS`` (a file
that gets one JSON line per row written). Publishing to ``db.down`` fails as the database would.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from queuey.errors import BackendError
from queuey.http import AccessPolicy, HttpConfig, publish_app
from queuey.topics.publication import InvalidTopicError, Publication

SUBSCRIBE = {"order.paid": ["fulfil", "notify_ops"]}
_TOPIC = re.compile(r"[A-Za-z0-9._:-]{1,200}")


class FilePublisher:
    """Appends each row to a JSON-lines file; ``db.down`` raises ``BackendError``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def publish(
        self, topic: str, payload: Any, published_by: str = "", *, priority: int = 0
    ) -> Publication:
        trimmed = topic.strip()
        if not _TOPIC.fullmatch(trimmed):
            raise InvalidTopicError(f"`{trimmed}` is not a topic")
        if trimmed == "db.down":
            raise BackendError("connection refused")
        subscribers = SUBSCRIBE.get(trimmed, [])
        with self.path.open("a") as rows:
            for subscriber in subscribers or [""]:
                row = {"topic": trimmed, "subscriber": subscriber, "payload": payload}
                rows.write(json.dumps({**row, "published_by": published_by}) + "\n")
        return Publication(str(uuid.uuid4()), trimmed, len(subscribers))


def create_app() -> Starlette:
    """The app, as ``uvicorn --factory http_uvicorn_app:create_app`` builds it."""
    table = {
        "base": "/api",
        "max_body_bytes": 1024,
        "jwt": {"secret": os.environ["QUEUEY_TEST_JWT_SECRET"], "audience": "queuey"},
    }
    config = HttpConfig.from_table(table, "acceptance.toml")
    publisher = FilePublisher(Path(os.environ["QUEUEY_TEST_ROWS"]))
    return publish_app(config, publisher, AccessPolicy.parse(os.environ["QUEUEY_TEST_PUBLISH"]))
