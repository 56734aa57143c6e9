"""The conformance suite's ``backend`` fixture, parametrized over every backend.

A case that needs a capability only some backends have checks it and skips elsewhere
(``backend.supports_transactions``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from queuey.backends.base import Backend
from queuey.backends.memory import MemoryBackend
from tests.conftest import fresh_schema

BACKENDS = ["memory", "postgres", pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)]


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """A fresh, isolated backend of each kind."""
    kind = request.param
    if kind == "memory":
        memory = MemoryBackend()
        yield memory
        await memory.close()
        return
    if kind == "postgres":
        from queuey.backends.postgres import PostgresBackend

        database_url = request.getfixturevalue("database_url")
        async with fresh_schema(database_url) as schema:
            pg = await PostgresBackend.connect(
                database_url, schema=schema, poll_interval="1s", lease="30s"
            )
            yield pg
            await pg.close()
        return
    if kind == "rabbitmq":
        from queuey.backends.rabbitmq import RabbitMqBackend

        amqp_url = request.getfixturevalue("amqp_url")
        rabbit = await RabbitMqBackend.connect(amqp_url)
        try:
            yield rabbit
        finally:
            await rabbit.close()
            await _delete_queues(amqp_url, rabbit.declared_queue_names())
        return
    raise AssertionError(kind)


async def _delete_queues(url: str, names: list[str]) -> None:
    """Delete the broker queues a RabbitMQ case declared (main, dead and hold queues)."""
    import aio_pika

    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        for name in names:
            await channel.queue_delete(name)
    finally:
        await connection.close()
