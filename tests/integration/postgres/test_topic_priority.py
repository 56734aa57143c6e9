"""A topic message's priority on a real PostgreSQL: ``queuey publish --priority`` records it on
every subscriber's row, a subscriber handles higher priorities first, and an out-of-range
priority is refused with nothing written."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from queuey.cli._app import connect_backend
from queuey.topics import App, QueuesConfig
from tests.helpers import run_until
from tests.integration.postgres.test_topics_cli import EXAMPLE, queuey

pytestmark = pytest.mark.postgres


def priorities(database_url: str, schema: str) -> list[tuple[str, int]]:
    with psycopg.connect(database_url) as conn:
        cursor = conn.execute(
            f'SELECT job_type, priority FROM "{schema}".queue_message ORDER BY seq'
        )
        return [(job_type, priority) for job_type, priority in cursor.fetchall()]


def test_queuey_publish_records_the_priority(database_url: str, pg_schema: str) -> None:
    args = ["--config", str(EXAMPLE), "--database-url", database_url, "--schema", pg_schema]
    published = queuey("publish", *args, "--priority", "7", "order.paid", '{"order": 1}')
    assert published.returncode == 0, published.stderr
    refused = queuey("publish", *args, "--priority", "11", "order.paid", "{}")
    assert refused.returncode == 2
    assert "--priority: 11 is out of range 0..10" in refused.stderr
    rows = priorities(database_url, pg_schema)
    assert [priority for _, priority in rows] == [7] * len(rows) and rows


async def test_a_subscriber_handles_higher_priorities_first(
    database_url: str, pg_schema: str
) -> None:
    config = QueuesConfig(prefix="prio", subscribe={"work": "record"}, batch=1, poll_secs=1)
    app = App(config)
    order: list[Any] = []
    app.register("record", order.append)
    backend = await connect_backend(config, database_url, schema=pg_schema)
    try:
        publisher = app.publisher(backend)
        await publisher.publish("work", "low")
        await publisher.publish("work", "top", priority=10)
        await publisher.publish("work", "mid", priority=5)
        with pytest.raises(ValueError, match=r"out of range for topic 'work': 0\.\.10"):
            await publisher.publish("work", "too high", priority=11)
        subscriber = app.subscriber(backend, concurrency=1)
        await run_until(subscriber, lambda: len(order) == 3)
    finally:
        await backend.close()
    assert order == ["top", "mid", "low"]
