"""A topic message's priority through the HTTP endpoint (the ``priority`` query parameter or
the ``X-Queuey-Priority`` header), recorded by the real ``TopicPublisher`` on the memory
backend, refused with 400 when it is not a whole number in range, and described in OpenAPI."""

from __future__ import annotations

import pytest

from queuey import MemoryBackend
from queuey.topics import QueuesConfig, TopicPublisher
from tests.unit.http.http_fakes import OPS_KEY, app_for, client

KEY = {"X-Api-Key": OPS_KEY}


def publisher() -> tuple[MemoryBackend, TopicPublisher]:
    backend = MemoryBackend()
    config = QueuesConfig(subscribe={"order.paid": ["fulfil", "notify"]})
    return backend, TopicPublisher(config, backend)


async def test_the_query_parameter_or_the_header_sets_the_priority() -> None:
    backend, topics = publisher()
    app, _ = app_for("role:ops", topics)
    async with client(app) as http:
        plain = await http.post("/queues/order.paid", json={"n": 1}, headers=KEY)
        query = await http.post("/queues/order.paid?priority=7", json={"n": 2}, headers=KEY)
        header = await http.post(
            "/queues/order.paid", json={"n": 3}, headers={**KEY, "X-Queuey-Priority": "4"}
        )
        both = await http.post(
            "/queues/order.paid?priority=9",
            json={"n": 4},
            headers={**KEY, "X-Queuey-Priority": "1"},
        )
    assert [r.status_code for r in (plain, query, header, both)] == [202] * 4
    pending = backend.pending_envelopes("order.paid", "topic")
    assert [(e.payload["n"], e.priority) for e in pending[::2]] == [(4, 9), (2, 7), (3, 4), (1, 0)]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("priority=11", "priority 11 is out of range for topic 'order.paid': 0..10"),
        ("priority=-1", "priority -1 is out of range for topic 'order.paid': 0..10"),
        ("priority=high", "priority must be a whole number, got 'high'"),
        ("priority=--1", "priority must be a whole number, got '--1'"),
    ],
)
async def test_a_bad_priority_is_400_with_nothing_written(query: str, message: str) -> None:
    backend, topics = publisher()
    app, _ = app_for("role:ops", topics)
    async with client(app) as http:
        response = await http.post(f"/queues/order.paid?{query}", json={}, headers=KEY)
    assert (response.status_code, response.json()) == (400, {"error": message})
    assert backend.pending("order.paid", "topic") == 0


async def test_openapi_describes_the_priority() -> None:
    app, _ = app_for("role:ops")
    async with client(app) as http:
        document = (await http.get("/openapi.json")).json()
    parameters = document["paths"]["/queues/{topic}"]["post"]["parameters"]
    by_name = {(p["name"], p["in"]): p["schema"] for p in parameters}
    expected = {"type": "integer", "minimum": 0, "maximum": 10}
    assert by_name[("priority", "query")] == expected
    assert by_name[("X-Queuey-Priority", "header")] == expected
