"""``queuey worker --http-port``: a real worker process serves ``/live``, ``/ready`` and
``/metrics``; after a known mix of outcomes the scraped series match it exactly, and
``--log-format json`` prints one JSON object per line, the start-up line included."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from queuey import Producer
from queuey.backends.postgres import PostgresBackend
from tests.acceptance.metrics_app import ObsQueues, Planned
from tests.acceptance.test_cli_worker import start, stop

pytestmark = pytest.mark.postgres

PLANS = ["ok"] * 3 + ["retry_once"] * 2 + ["defer_once"] + ["dead"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus exposition by (name, sorted labels)."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def jobs(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], outcome: str) -> float:
    return found[("queuey_jobs_total", (("outcome", outcome), ("queue", "obs.work")))]


async def test_metrics_scraped_from_a_worker_process_match_the_outcomes(
    database_url: str, pg_schema: str
) -> None:
    async with PostgresBackend(database_url, schema=pg_schema) as backend:
        producer = await Producer.create(ObsQueues, backend)
        await producer.enqueue_many([Planned(plan=plan) for plan in PLANS])
    port = free_port()
    proc = start(
        "tests.acceptance.metrics_app:build",
        *("--http-port", str(port), "--http-host", "127.0.0.1", "--log-format", "json", "-v"),
        env={"QUEUEY_SCHEMA": pg_schema, "QUEUEY_DATABASE_URL": database_url},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=5) as client:
            found = await _settled(client)
            assert (await client.get("/live")).status_code == 200
            ready = await client.get("/ready")
            assert (ready.status_code, ready.text) == (200, "ready\n")
    finally:
        _, err = stop(proc)
    assert jobs(found, "succeeded") == 6  # 3 ok, 2 after their retry, 1 after its deferral
    assert jobs(found, "retried") == 2
    assert jobs(found, "deferred") == 1
    assert jobs(found, "dead") == 1
    assert jobs(found, "settle_failure") == 0
    assert found[("queuey_job_duration_seconds_count", (("queue", "obs.work"),))] == 10
    assert found[("queuey_job_lag_seconds_count", (("queue", "obs.work"),))] == 10
    assert found[("queuey_jobs_in_flight", (("queue", "obs.work"),))] == 0
    depth = {
        state: found[("queuey_queue_depth", (("queue", "obs.work"), ("state", state)))]
        for state in ("pending", "scheduled", "running", "failed")
    }
    assert depth == {"pending": 0, "scheduled": 0, "running": 0, "failed": 1}
    lines = [line for line in err.splitlines() if line.strip()]
    text = [line for line in lines if not line.startswith("{")]
    assert text == [], "--log-format json printed lines that are not JSON"
    records = [json.loads(line) for line in lines]
    (banner,) = [r for r in records if r["message"].startswith("queuey worker: queues obs.work")]
    assert banner["logger"] == "queuey.cli" and banner["level"] == "INFO"
    succeeded = [r for r in records if r["message"].endswith("succeeded")]
    assert len(succeeded) == 6
    assert {r["queue"] for r in succeeded} == {"obs.work"}
    assert all(r["logger"] == "queuey.worker" and r["level"] == "INFO" for r in succeeded)


async def _settled(
    client: httpx.AsyncClient,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The scrape once every job has ended and the depth sampler has seen the end state (a
    sample taken earlier may still count the deferred job as scheduled: the sampler runs on
    its own interval)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            response = await client.get("/metrics")
        except httpx.TransportError:
            response = None
        if response is not None and response.status_code == 200:
            found = samples(response.text)
            depth = {
                state: found.get(("queuey_queue_depth", (("queue", "obs.work"), ("state", state))))
                for state in ("pending", "scheduled", "running", "failed")
            }
            try:
                done = jobs(found, "succeeded") + jobs(found, "dead") == 7
            except KeyError:
                done = False
            if done and depth == {"pending": 0, "scheduled": 0, "running": 0, "failed": 1}:
                return found
        assert time.monotonic() < deadline, "the worker never settled every job"
        await asyncio.sleep(0.2)
