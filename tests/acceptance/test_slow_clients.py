"""Slow clients: connections dribbling a request's headers or body are answered 408 and closed
within the read timeouts, on ``HttpServer`` in process (the publish endpoint) and on
``queuey dashboard`` in a child process ([http] header_timeout_secs / body_timeout_secs).

Each dribbling client sends one byte every 0.2 s and never finishes; it records when the
server closed the connection and what it answered. The bounds leave room for a loaded machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from queuey.http import AccessPolicy, HttpConfig, publish_app
from queuey.http.server import HttpServer
from tests.acceptance.dashboard_server import serve, write_app
from tests.acceptance.http_process import free_port
from tests.acceptance.test_http_server import NullPublisher

HEADER_SECS = 1.0
BODY_SECS = 1.5
SLACK = 3.0  # scheduling on a loaded 2-core machine; a dribbler would otherwise run forever
DRIBBLE_GAP = 0.2


@dataclass(frozen=True)
class Ended:
    """How a dribbling connection ended: after how long, and what the server sent."""

    secs: float
    answer: bytes

    @property
    def status(self) -> str:
        return self.answer.split(b"\r\n", 1)[0].decode(errors="replace")


async def dribble(port: int, head: bytes, rest: bytes, limit: float) -> Ended:
    """Send ``head`` at once, then ``rest`` a byte at a time until the server closes (or
    ``limit`` seconds pass: the test then fails on the time)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    began = time.monotonic()

    async def trickle() -> None:
        try:
            writer.write(head)
            for byte in rest:
                await writer.drain()
                await asyncio.sleep(DRIBBLE_GAP)
                writer.write(bytes([byte]))
        except (ConnectionError, RuntimeError):
            return  # the server closed: what the test expects

    sending = asyncio.create_task(trickle())
    try:
        async with asyncio.timeout(limit):
            answer = await reader.read()  # until the server closes
    except TimeoutError:
        answer = b"(still open)"
    ended = Ended(time.monotonic() - began, answer)
    sending.cancel()
    writer.close()
    await asyncio.gather(sending, return_exceptions=True)
    return ended


def slow_headers(path: str) -> tuple[bytes, bytes]:
    return b"POST " + path.encode() + b" HTTP/1.1\r\n", b"Host: x\r\nX-Slow: " + b"a" * 200


def slow_body(path: str) -> tuple[bytes, bytes]:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 200\r\n\r\n{"
    ).encode()
    return head, b" " * 198 + b"}"


async def dribblers(port: int, path: str, each: int) -> tuple[list[Ended], list[Ended]]:
    """``each`` connections dribbling headers and ``each`` dribbling a body, all at once."""
    limit = BODY_SECS + SLACK + 5
    headers = [dribble(port, *slow_headers(path), limit) for _ in range(each)]
    bodies = [dribble(port, *slow_body(path), limit) for _ in range(each)]
    ended = await asyncio.gather(*headers, *bodies)
    return ended[:each], ended[each:]


@pytest.fixture
async def endpoint() -> AsyncIterator[int]:
    port = free_port()
    app = publish_app(HttpConfig(), NullPublisher(), AccessPolicy.parse("public"))
    server = HttpServer(
        app, port=port, header_timeout_secs=HEADER_SECS, body_timeout_secs=BODY_SECS
    )
    task = asyncio.create_task(server.run())
    while not server.started:
        await asyncio.sleep(0.02)
    yield port
    server.shutdown(force=True)
    await asyncio.wait_for(task, timeout=10)


async def test_dribbled_headers_and_bodies_get_408_and_are_closed_within_the_bounds(
    endpoint: int,
) -> None:
    headers, bodies = await dribblers(endpoint, "/queues/order.paid", each=6)
    assert [e.status for e in headers] == ["HTTP/1.1 408 Request Timeout"] * 6
    assert all(b"headers did not arrive within 1 s" in e.answer for e in headers)
    assert all(HEADER_SECS - 0.1 <= e.secs <= HEADER_SECS + SLACK for e in headers), headers
    assert [e.status for e in bodies] == ["HTTP/1.1 408 Request Timeout"] * 6
    assert all(b"body did not arrive within 1.5 s" in e.answer for e in bodies)
    assert all(BODY_SECS - 0.1 <= e.secs <= BODY_SECS + SLACK for e in bodies), bodies


async def test_a_silent_connection_is_closed_without_an_answer(endpoint: int) -> None:
    ended = await dribble(endpoint, b"", b"", HEADER_SECS + SLACK + 5)
    assert ended.answer == b"" and ended.secs <= HEADER_SECS + SLACK


async def test_a_kept_alive_connection_gets_a_fresh_header_bound_for_its_next_request(
    endpoint: int,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", endpoint)
    request = (
        b"POST /queues/order.paid HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\n\r\n{}"
    )
    writer.write(request)
    first = await reader.readuntil(b"}")  # the 202's JSON body
    began = time.monotonic()
    writer.write(b"POST /queues/order.paid HTTP/1.1\r\nHo")  # the next one stalls
    async with asyncio.timeout(HEADER_SECS + SLACK + 5):
        second = await reader.read()
    writer.close()
    assert first.startswith(b"HTTP/1.1 202")
    assert second.startswith(b"HTTP/1.1 408") and time.monotonic() - began <= HEADER_SECS + SLACK


async def test_slow_requests_within_the_bounds_are_served(endpoint: int) -> None:
    async def body() -> AsyncIterator[bytes]:
        for part in (b'{"n"', b": 1", b"}"):
            await asyncio.sleep(0.3)  # 0.9 s in all, within 1.5
            yield part

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{endpoint}") as http:
        answer = await http.post(
            "/queues/order.paid", content=body(), headers={"Content-Type": "application/json"}
        )
        again = await http.post("/queues/order.paid", json={"n": 2})
    assert (answer.status_code, again.status_code) == (202, 202)


@pytest.mark.postgres
def test_queuey_dashboard_applies_the_http_table_s_read_timeouts(
    tmp_path: Path, database_url: str, pg_schema: str
) -> None:
    config = write_app(tmp_path)
    text = config.read_text().replace(
        'base = "/api"\n', 'base = "/api"\nheader_timeout_secs = 1\nbody_timeout_secs = 1.5\n'
    )
    config.write_text(text)
    with serve(["dashboard"], config, database_url, pg_schema, "/api/dashboard/login") as served:
        port = int(served.url.rsplit(":", 1)[1])
        headers, bodies = asyncio.run(dribblers(port, "/api/dashboard/login", each=3))
        after = httpx.get(f"{served.dashboard}/login")
    assert all(e.status == "HTTP/1.1 408 Request Timeout" for e in headers + bodies)
    assert all(e.secs <= HEADER_SECS + SLACK for e in headers), headers
    assert all(e.secs <= BODY_SECS + SLACK for e in bodies), bodies
    assert after.status_code == 200
