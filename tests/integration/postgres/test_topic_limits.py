"""``[queues.limits]`` on a real PostgreSQL: a subscriber limited to one message at a time runs
one at a time across two processes' subscribers (two backends, each with its own connections),
and every message is handled once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from queuey.cli._app import connect_backend
from queuey.topics import App, QueuesConfig

pytestmark = pytest.mark.postgres


async def test_a_subscriber_limit_holds_across_processes(database_url: str, pg_schema: str) -> None:
    config = QueuesConfig(
        prefix="lim", subscribe={"order.paid": "ship"}, limits={"ship": "concurrency 1"}
    )
    running, peak, done = [0], [0], []

    async def ship(payload: Any) -> None:
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0.05)
        running[0] -= 1
        done.append(payload["n"])

    backends = [await connect_backend(config, database_url, schema=pg_schema) for _ in range(2)]
    subscribers = []
    for backend in backends:
        app = App(config)
        app.register("ship", ship)
        subscribers.append(app.subscriber(backend, concurrency=4))
    tasks = [asyncio.create_task(s.run()) for s in subscribers]
    try:
        publisher = App(config).publisher(backends[0])
        for n in range(10):
            await publisher.publish("order.paid", {"n": n})
        async with asyncio.timeout(30):
            while len(done) < 10:
                await asyncio.sleep(0.02)
    finally:
        for s in subscribers:
            s.shutdown()
        await asyncio.gather(*tasks)
        for backend in backends:
            await backend.close()
    assert sorted(done) == list(range(10)) and peak[0] == 1
