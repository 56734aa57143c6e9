"""The integration examples against a real PostgreSQL: the Django project (a view enqueueing in
``transaction.atomic()``, a worker run by ``queuey worker``) and the FastAPI app (an endpoint
enqueueing in its own psycopg transaction)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.helpers import ROOT, python_path

pytestmark = pytest.mark.postgres

DJANGO = ROOT / "examples" / "django"


def query(url: str, statement: str, schema: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(statement.replace("{s}", f'"{schema}"')).fetchall()


def environment(url: str, schema: str, *paths: Path) -> dict[str, str]:
    extra = os.pathsep.join(str(path) for path in paths)
    return {
        **os.environ,
        "QUEUEY_DATABASE_URL": url,
        "QUEUEY_SCHEMA": schema,
        "PYTHONPATH": os.pathsep.join(filter(None, [extra, python_path()])),
    }


def wait_until(check: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_django_commits_the_job_with_the_order_and_a_worker_runs_it(
    database_url: str, pg_schema: str
) -> None:
    env = environment(database_url, pg_schema)
    driver = subprocess.run(
        [sys.executable, "-m", "tests.integration.postgres.django_driver"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert driver.returncode == 0, driver.stderr
    placed, declined = (json.loads(line) for line in driver.stdout.splitlines())
    assert placed["status"] == 201 and declined["status"] == 402
    orders = query(database_url, "SELECT id, receipt_sent FROM {s}.orders_order", pg_schema)
    assert orders == [(placed["body"]["order"], False)]  # the declined order was rolled back
    jobs = query(database_url, "SELECT id::text, status FROM {s}.queue_message", pg_schema)
    assert jobs == [(placed["body"]["job"], "pending")]  # and so was its job

    worker = subprocess.Popen(
        [sys.executable, "-m", "queuey", "worker", "shop.worker:build"],
        cwd=DJANGO,
        env=environment(database_url, pg_schema, DJANGO),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(
            lambda: (
                query(database_url, "SELECT status FROM {s}.queue_message", pg_schema)
                == [("done",)]
            )
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        _, errors = worker.communicate(timeout=20)
    assert worker.returncode == 0, errors
    assert query(database_url, "SELECT receipt_sent FROM {s}.orders_order", pg_schema) == [(True,)]


def fastapi_app(url: str, schema: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``examples/fastapi/app.py`` loaded afresh for ``url`` and ``schema``."""
    import importlib.util

    monkeypatch.setenv("QUEUEY_DATABASE_URL", url)
    monkeypatch.setenv("QUEUEY_SCHEMA", schema)
    spec = importlib.util.spec_from_file_location(
        "fastapi_example", ROOT / "examples" / "fastapi" / "app.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # pydantic's generics look it up
    spec.loader.exec_module(module)
    return module


async def test_fastapi_enqueues_in_its_own_transaction(
    database_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    from tests.helpers import run_until

    example = fastapi_app(database_url, pg_schema, monkeypatch)
    transport = httpx.ASGITransport(app=example.app)
    async with (
        example.lifespan(example.app),
        httpx.AsyncClient(transport=transport, base_url="http://app") as http,
    ):
        kept = await http.post("/signups", params={"email": "a@b.c"})
        failed = await http.post("/signups", params={"email": "x@y.z", "fail": "true"})
    assert kept.status_code == 201, kept.text
    assert failed.status_code == 500 and "nothing was kept" in failed.text
    users = query(database_url, "SELECT id, email FROM {s}.users", pg_schema)
    assert users == [(kept.json()["user"], "a@b.c")]
    jobs = query(database_url, "SELECT id::text FROM {s}.queue_message", pg_schema)
    assert jobs == [(kept.json()["job"],)]

    worker = await example.build_worker()
    stats = worker.stats["signups.welcome"]
    await run_until(worker, lambda: stats.succeeded == 1)
    done = query(database_url, "SELECT status FROM {s}.queue_message", pg_schema)
    assert done == [("done",)]


def test_django_enqueues_follow_the_transaction_by_default_or_warn(
    database_url: str, pg_schema: str
) -> None:
    driver = subprocess.run(
        [sys.executable, "-m", "tests.integration.postgres.django_atomic_driver"],
        cwd=ROOT,
        env=environment(database_url, pg_schema),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert driver.returncode == 0, driver.stderr
    report = json.loads(driver.stdout)
    ids = report["ids"]
    rows = dict(query(database_url, "SELECT id::text, status FROM {s}.queue_message", pg_schema))
    kept = {case for case, job_id in ids.items() if rows.get(job_id) == "pending"}
    assert kept == {
        "plain_in_rolled_back_block",  # written outside the block: the trap the warning names
        "plain_outside",
        "following_committed",
        "following_outside",
    }
    ((category, message, where),) = report["warnings"]
    assert (category, where) == ("TransactionWarning", "django_atomic_driver.py")
    assert "runs even if the block rolls back" in message
    assert "default_connection=django.db.connection" in message
