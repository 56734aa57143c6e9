"""The publish endpoint served by a real uvicorn process on loopback.

Two servers run for the module, both with ``base = "/api"`` and a 1024-byte body limit: one
with ``publish = "role:ops"`` and one with the default ``private``. Requests go over TCP with
httpx, including a chunked body far over the limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import jwt
import pytest

from tests.acceptance.http_process import free_port, python_path, stop, wait_until_up

HERE = Path(__file__).parent
SECRET = "acceptance-secret-acceptance-secret"
CLOSED = {"error": "this app does not accept published messages"}


@dataclass(frozen=True)
class Server:
    """A running server: its URL and the file its publisher appends rows to."""

    url: str
    rows_file: Path

    def rows(self) -> list[dict[str, object]]:
        if not self.rows_file.exists():
            return []
        return [json.loads(line) for line in self.rows_file.read_text().splitlines()]


@contextmanager
def uvicorn_serving(publish: str, rows: Path) -> Iterator[Server]:
    """Run ``http_uvicorn_app`` under uvicorn on a free loopback port until the block ends."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": python_path(),
        "QUEUEY_TEST_PUBLISH": publish,
        "QUEUEY_TEST_JWT_SECRET": SECRET,
        "QUEUEY_TEST_ROWS": str(rows),
    }
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "http_uvicorn_app:create_app",
        "--app-dir", str(HERE), "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = b""
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(f"{url}/api/openapi.json", process)
        yield Server(url, rows)
    finally:
        output = stop(process)
    assert SECRET.encode() not in output
    assert b"Bearer" not in output


@pytest.fixture(scope="module")
def ops_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with uvicorn_serving("role:ops", tmp_path_factory.mktemp("ops") / "rows.jsonl") as server:
        yield server


@pytest.fixture(scope="module")
def closed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with uvicorn_serving("private", tmp_path_factory.mktemp("closed") / "rows.jsonl") as server:
        yield server


def bearer(sub: str, roles: list[str], exp_in: int = 86400) -> dict[str, str]:
    claims = {"sub": sub, "roles": roles, "aud": "queuey", "exp": int(time.time()) + exp_in}
    return {"Authorization": f"Bearer {jwt.encode(claims, SECRET, algorithm='HS256')}"}


OPS = bearer("olga", ["ops"])
MEMBER = bearer("mo", ["member"])


def test_the_done_when_matrix(ops_server: Server, closed_server: Server) -> None:
    with httpx.Client(base_url=ops_server.url) as http:
        ops = http.post("/api/queues/order.paid", json={"order": 42}, headers=OPS)
        member = http.post("/api/queues/order.paid", json={"order": 42}, headers=MEMBER)
        anonymous = http.post("/api/queues/order.paid", json={"order": 42})
    with httpx.Client(base_url=closed_server.url) as http:
        closed = http.post("/api/queues/order.paid", json={"order": 42}, headers=OPS)
    assert (ops.status_code, ops.json()["topic"], ops.json()["delivered"]) == (
        202,
        "order.paid",
        2,
    )
    assert (member.status_code, member.json()) == (403, {"error": "forbidden"})
    assert (anonymous.status_code, anonymous.json()) == (401, {"error": "authentication required"})
    assert (closed.status_code, closed.json()) == (404, CLOSED)
    assert ops_server.rows() == [
        {"topic": "order.paid", "subscriber": s, "payload": {"order": 42}, "published_by": "olga"}
        for s in ("fulfil", "notify_ops")
    ]
    assert closed_server.rows() == []


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "status"),
    [
        ("GET", "/api/queues/order.paid", OPS, None, 405),
        ("POST", "/api/queues/order.paid", bearer("olga", ["ops"], exp_in=-5), b"{}", 401),
        ("POST", "/api/queues/order.paid", {"X-Api-Key": "nope"}, b"{}", 401),
        ("POST", "/api/queues/order.paid", OPS, b"[" + b"1," * 600 + b"1]", 413),
        ("POST", "/api/queues/order.paid", OPS, b"{not json", 400),
        ("POST", "/api/queues/order%20paid", OPS, b"{}", 400),
        ("POST", "/api/queues/db.down", OPS, b'{"a": 1}', 500),
        ("POST", "/queues/order.paid", OPS, b"{}", 404),
    ],
)
def test_every_refusal_over_tcp_writes_nothing(
    ops_server: Server,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None,
    status: int,
) -> None:
    before = ops_server.rows()
    with httpx.Client(base_url=ops_server.url) as http:
        response = http.request(method, path, headers=headers, content=body)
    assert response.status_code == status
    assert set(response.json()) == {"error"}
    assert ops_server.rows() == before


def test_a_streamed_oversized_body_is_cut_off(ops_server: Server) -> None:
    total = 1024  # chunks of 64 KiB: 64 MiB, far more than loopback socket buffers hold
    pulled: list[int] = []

    def chunks() -> Iterator[bytes]:
        for _ in range(total):
            pulled.append(1)
            yield b"x" * 65536

    before = ops_server.rows()
    with httpx.Client(base_url=ops_server.url, timeout=30.0) as http:
        response = http.post("/api/queues/order.paid", content=chunks(), headers=OPS)
    assert response.status_code == 413
    assert response.json() == {"error": "the body is larger than 1024 bytes"}
    assert len(pulled) < total
    assert ops_server.rows() == before


def test_openapi_only_where_the_endpoint_exists(ops_server: Server, closed_server: Server) -> None:
    document = httpx.get(f"{ops_server.url}/api/openapi.json").json()
    assert "/api/queues/{topic}" in document["paths"]
    closed = httpx.get(f"{closed_server.url}/api/openapi.json")
    assert closed.status_code == 404
