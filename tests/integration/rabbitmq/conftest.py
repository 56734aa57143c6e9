"""Fixtures for the RabbitMQ integration tests: a raw aio-pika connection to look at the
broker behind the backend's back, and ``rabbitmqctl`` to read queue arguments or restart it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import unquote, urlsplit

import aio_pika
import pytest
from aio_pika.abc import AbstractConnection

Ctl = Callable[..., Awaitable[str]]
QueueInfo = dict[str, Any]


@pytest.fixture
async def raw(amqp_url: str) -> AsyncIterator[AbstractConnection]:
    """A plain aio-pika connection, closed afterwards."""
    connection = await aio_pika.connect(amqp_url)
    yield connection
    await connection.close()


async def _rabbitmqctl(*args: str, timeout: float = 30) -> str:
    process = await asyncio.create_subprocess_exec(
        "rabbitmqctl",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(timeout):
        out, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed: {err.decode()}")
    return out.decode()


def vhost_of(url: str) -> str:
    """The virtual host an AMQP URL names (``/`` when it names none), as ``rabbitmqctl -p``
    takes it."""
    path = urlsplit(url).path
    return unquote(path[1:]) if len(path) > 1 else "/"


_PER_VHOST = frozenset({"list_queues", "list_exchanges", "list_bindings", "list_consumers"})


@pytest.fixture
def ctl(amqp_url: str) -> Ctl:
    """Run ``rabbitmqctl`` with the given arguments; returns its standard output. A command
    that lists one virtual host's objects reads the test URL's (``-p``) unless told another."""
    vhost = vhost_of(amqp_url)

    async def run(*args: str, timeout: float = 30) -> str:
        if args and args[0] in _PER_VHOST and "-p" not in args:
            args = (args[0], "-p", vhost, *args[1:])
        return await _rabbitmqctl(*args, timeout=timeout)

    return run


@pytest.fixture
def list_queues(ctl: Ctl) -> Callable[[str], Awaitable[dict[str, QueueInfo]]]:
    """Queues whose name starts with a prefix, read back from the broker, in the test URL's
    virtual host: ``{name: {"durable": bool, "arguments": {key: value}}}``."""

    async def read(prefix: str) -> dict[str, QueueInfo]:
        out = await ctl("list_queues", "name", "durable", "arguments", "--formatter", "json", "-q")
        rows = json.loads(out)
        return {
            row["name"]: {
                "durable": row["durable"],
                "arguments": {key: value for key, _type, value in row["arguments"]},
            }
            for row in rows
            if row["name"].startswith(prefix)
        }

    return read


Connect = Callable[..., Awaitable[Any]]


@pytest.fixture
async def connect(amqp_url: str) -> AsyncIterator[Connect]:
    """``await connect(options)``: a ``RabbitMqBackend`` with those options; each one is closed
    and every queue it declared deleted afterwards."""
    from queuey.backends.rabbitmq import RabbitMqBackend, RabbitMqOptions

    opened: list[RabbitMqBackend] = []

    async def open_backend(options: RabbitMqOptions | None = None) -> RabbitMqBackend:
        backend = await RabbitMqBackend.connect(amqp_url, options)
        opened.append(backend)
        return backend

    yield open_backend
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        for backend in opened:
            await backend.close()
            for name in backend.declared_queue_names():
                await channel.queue_delete(name)
    finally:
        await connection.close()


@pytest.fixture
async def rabbitmq(connect: Connect) -> Any:
    """A connected ``RabbitMqBackend`` with default options (cleaned up like ``connect``)."""
    return await connect()
