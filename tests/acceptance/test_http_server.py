"""``HttpServer``: uvicorn inside the caller's loop, stopped by the caller, signals untouched."""

from __future__ import annotations

import asyncio
import signal
import socket

import httpx

from queuey.http import AccessPolicy, HttpConfig, publish_app
from queuey.http.server import HttpServer
from queuey.topics.publication import Publication


class NullPublisher:
    async def publish(
        self, topic: str, payload: object, published_by: str = "", *, priority: int = 0
    ) -> Publication:
        return Publication("id-1", topic.strip(), 0)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_serves_until_shut_down_and_leaves_signals_alone() -> None:
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    port = free_port()
    app = publish_app(HttpConfig(), NullPublisher(), AccessPolicy.parse("public"))
    server = HttpServer(app, port=port)
    task = asyncio.create_task(server.run())
    for _ in range(200):
        if server.started:
            break
        await asyncio.sleep(0.02)
    assert server.started
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        response = await http.post("/queues/order.paid", json={})
    assert (response.status_code, response.json()["topic"]) == (202, "order.paid")
    server.shutdown()
    server.shutdown()
    await asyncio.wait_for(task, timeout=10)
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers
