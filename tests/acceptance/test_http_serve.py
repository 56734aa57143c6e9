"""``queuey serve`` as a user runs it, on PostgreSQL: the README's curl matrix (ops token 202
and a row per subscriber, member token 403, no token 401, default config 404), a clean exit on
SIGTERM, and configuration errors naming the key and the file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import jwt
import psycopg
import pytest

from tests.acceptance.http_process import ROOT, free_port, python_path, stop, wait_until_up

pytestmark = pytest.mark.postgres

SECRET = "serve-secret-serve-secret-serve-secret"
SHOP = """
[queues.subscribe]
"order.paid" = ["fulfil_order", "notify_ops"]
"""
OPEN = f"""
[queues]
publish = "role:ops"
{SHOP}
[http]
base = "/api"

[http.jwt]
secret = "${{QUEUEY_JWT_SECRET}}"
audience = "queuey"
"""


def token(sub: str, roles: list[str]) -> str:
    claims = {"sub": sub, "roles": roles, "aud": "queuey", "exp": int(time.time()) + 86400}
    return jwt.encode(claims, SECRET, algorithm="HS256")


def environment(database_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": python_path(),
        "QUEUEY_DATABASE_URL": database_url,
        "QUEUEY_JWT_SECRET": SECRET,
    }


def queuey_serve(config: Path, schema: str, port: int) -> list[str]:
    return [
        sys.executable, "-m", "queuey", "serve", "--config", str(config),
        "--schema", schema, "--port", str(port),
    ]  # fmt: skip


@contextmanager
def serving(config: Path, schema: str, database_url: str) -> Iterator[tuple[str, list[bytes]]]:
    """``queuey serve`` on a free port; yields its URL and, after the block, its output."""
    port = free_port()
    process = subprocess.Popen(
        queuey_serve(config, schema, port),
        cwd=ROOT,
        env=environment(database_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    printed: list[bytes] = []
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(f"{url}/api/queues/x", process)
        yield url, printed
    finally:
        printed.append(stop(process))
        printed.append(str(process.returncode).encode())


def rows(database_url: str, schema: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return conn.execute(
            f'SELECT job_type, status, published_by, payload FROM "{schema}".queue_message '
            "ORDER BY seq"
        ).fetchall()


def test_the_readme_matrix(tmp_path: Path, database_url: str, pg_schema: str) -> None:
    config = tmp_path / "app.toml"
    config.write_text(OPEN)
    ops = {"Authorization": f"Bearer {token('olga', ['ops'])}"}
    member = {"Authorization": f"Bearer {token('mo', ['member'])}"}
    with serving(config, pg_schema, database_url) as (url, printed):
        with httpx.Client(base_url=url) as http:
            accepted = http.post("/api/queues/order.paid", json={"order": 42}, headers=ops)
            forbidden = http.post("/api/queues/order.paid", json={"order": 42}, headers=member)
            anonymous = http.post("/api/queues/order.paid", json={"order": 42})
            document = http.get("/api/openapi.json")
    assert (accepted.status_code, accepted.json()["delivered"]) == (202, 2)
    assert (forbidden.status_code, forbidden.json()) == (403, {"error": "forbidden"})
    assert (anonymous.status_code, anonymous.json()) == (401, {"error": "authentication required"})
    assert document.status_code == 200
    assert rows(database_url, pg_schema) == [
        ("fulfil_order", "pending", "olga", {"order": 42}),
        ("notify_ops", "pending", "olga", {"order": 42}),
    ]
    output, returncode = printed
    assert returncode == b"0", output
    assert b"Uvicorn running on http://127.0.0.1:" in output
    assert SECRET.encode() not in output
    assert ops["Authorization"].split()[1].encode() not in output


def test_the_default_config_has_no_endpoint(
    tmp_path: Path, database_url: str, pg_schema: str
) -> None:
    config = tmp_path / "app.toml"
    config.write_text(SHOP)
    ops = {"Authorization": f"Bearer {token('olga', ['ops'])}"}
    with serving(config, pg_schema, database_url) as (url, printed):
        response = httpx.post(f"{url}/queues/order.paid", json={"order": 42}, headers=ops)
        document = httpx.get(f"{url}/openapi.json")
    assert (response.status_code, response.json()) == (
        404,
        {"error": "this app does not accept published messages"},
    )
    assert document.status_code == 404
    assert rows(database_url, pg_schema) == []
    assert printed[1] == b"0"


def test_sigint_also_stops_it_cleanly(tmp_path: Path, database_url: str, pg_schema: str) -> None:
    config = tmp_path / "app.toml"
    config.write_text(SHOP)
    port = free_port()
    process = subprocess.Popen(
        queuey_serve(config, pg_schema, port),
        cwd=ROOT,
        env=environment(database_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    wait_until_up(f"http://127.0.0.1:{port}/", process)
    output = stop(process, signal.SIGINT)
    assert process.returncode == 0, output
    assert b"Traceback" not in output


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (OPEN.replace('base = "/api"', 'bse = "/api"'), "[http] bse: unknown key"),
        (OPEN.replace("${QUEUEY_JWT_SECRET}", "short"), "[http.jwt] secret: must be at least"),
        (OPEN + "\n[[http.api_keys]]\nid = 1\n", "[[http.api_keys]] #1 id: expected a string"),
    ],
)
def test_a_bad_http_table_exits_2_naming_the_key_and_the_file(
    tmp_path: Path, database_url: str, toml: str, message: str
) -> None:
    config = tmp_path / "app.toml"
    config.write_text(toml)
    result = subprocess.run(
        queuey_serve(config, "unused", free_port()),
        cwd=ROOT,
        env=environment(database_url),
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"{config}: {message}".encode() in result.stderr
    assert SECRET.encode() not in result.stderr
