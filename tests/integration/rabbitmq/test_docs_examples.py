"""The documentation's example that runs on every backend runs on a real RabbitMQ and
PostgreSQL, with queue names and a schema of its own; its queues are deleted afterwards."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika
import pytest

from tests.conftest import unique
from tests.doc_examples import ON_RABBITMQ, load_example

pytestmark = [pytest.mark.rabbitmq, pytest.mark.postgres]


@pytest.mark.parametrize("name", ON_RABBITMQ)
async def test_example_runs(
    name: str,
    amqp_url: str,
    database_url: str,
    pg_schema: str,
    list_queues: Callable[[str], Awaitable[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prefix = unique("docs")
    monkeypatch.setenv("QUEUEY_AMQP_URL", amqp_url)
    monkeypatch.setenv("QUEUEY_DATABASE_URL", database_url)
    monkeypatch.setenv("QUEUEY_SCHEMA", pg_schema)
    monkeypatch.setenv("QUEUEY_PREFIX", prefix)
    module = load_example(name, monkeypatch)
    try:
        await module.main()
    finally:
        names = await list_queues(f"{prefix}.")
        connection = await aio_pika.connect(amqp_url)
        async with connection:
            channel = await connection.channel()
            for queue in names:
                await channel.queue_delete(queue)
    assert f"{prefix}.greetings" in names  # the example did run on RabbitMQ
