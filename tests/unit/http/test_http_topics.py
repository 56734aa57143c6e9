"""The endpoint over the real ``TopicPublisher`` on ``MemoryBackend``: messages reach the
subscriber functions with the caller as ``published_by``; refusals record nothing."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from queuey import MemoryBackend
from queuey.http import AccessPolicy, publish_app
from queuey.testing import run_until_idle
from queuey.topics import App, MessageContext, QueuesConfig
from tests.unit.http.http_fakes import OPS_KEY, bearer, client, http_config, token
from tests.unit.http.test_http_fuzz import FUZZ, bodies, topics

SUBSCRIBE = {"order.paid": ["fulfil_order", "notify_ops"]}
OPS = bearer(token(sub="olga", roles=["ops"]))
MEMBER = bearer(token(sub="mo", roles=["member"]))


def shop(publish: str) -> tuple[App, list[tuple[str, Any, MessageContext]]]:
    app = App(QueuesConfig(subscribe=SUBSCRIBE, publish=publish))
    calls: list[tuple[str, Any, MessageContext]] = []

    @app.function
    async def fulfil_order(payload: Any, context: MessageContext) -> None:
        calls.append(("fulfil_order", payload, context))

    @app.function
    async def notify_ops(payload: Any, context: MessageContext) -> None:
        calls.append(("notify_ops", payload, context))

    return app, calls


def endpoint(app: App, backend: MemoryBackend) -> Any:
    access = AccessPolicy.parse(app.config.publish_access())
    return publish_app(http_config(), app.publisher(backend), access)


async def test_an_ops_token_reaches_every_subscriber() -> None:
    app, calls = shop("role:ops")
    backend = MemoryBackend()
    async with client(endpoint(app, backend)) as http:
        response = await http.post("/queues/order.paid", json={"order": 42}, headers=OPS)
    assert response.status_code == 202
    publication = response.json()
    assert (publication["topic"], publication["delivered"]) == ("order.paid", 2)
    assert backend.pending("order.paid", "topic") == 2
    await run_until_idle(app.subscriber(backend), backend)
    assert sorted(name for name, _, _ in calls) == ["fulfil_order", "notify_ops"]
    assert all(payload == {"order": 42} for _, payload, _ in calls)
    assert {context.published_by for _, _, context in calls} == {"olga"}
    assert publication["id"] in {context.message_id for _, _, context in calls}


async def test_an_api_key_publishes_as_its_id() -> None:
    app, calls = shop("role:ops")
    backend = MemoryBackend()
    async with client(endpoint(app, backend)) as http:
        response = await http.post("/queues/order.paid", headers={"X-Api-Key": OPS_KEY})
    assert response.status_code == 202
    await run_until_idle(app.subscriber(backend), backend)
    assert [(payload, context.published_by) for _, payload, context in calls] == [
        ({}, "ops-bot"),
        ({}, "ops-bot"),
    ]


async def test_refusals_record_nothing() -> None:
    app, _ = shop("role:ops")
    backend = MemoryBackend()
    async with client(endpoint(app, backend)) as http:
        assert (await http.post("/queues/order.paid", json={}, headers=MEMBER)).status_code == 403
        assert (await http.post("/queues/order.paid", json={})).status_code == 401
        assert (await http.post("/queues/order paid", json={}, headers=OPS)).status_code == 400
    closed, _ = shop("private")
    async with client(endpoint(closed, backend)) as http:
        assert (await http.post("/queues/order.paid", json={}, headers=OPS)).status_code == 404
    assert backend.queue_names("topic") == []


async def test_a_topic_nobody_subscribes_to_is_recorded_as_handled() -> None:
    app, _ = shop("public")
    backend = MemoryBackend()
    async with client(endpoint(app, backend)) as http:
        response = await http.post("/queues/nobody.listens", content=b"[1, 2]")
    assert (response.status_code, response.json()["delivered"]) == (202, 0)
    (orphan,) = backend.acked("nobody.listens", "topic")
    assert (orphan.job_id, orphan.payload) == (response.json()["id"], [1, 2])


@FUZZ
@given(topic=topics, body=bodies, credentials=st.sampled_from([{}, OPS, MEMBER]))
async def test_fuzz_against_the_real_publisher(
    topic: str, body: bytes, credentials: dict[str, str]
) -> None:
    app, _ = shop("authenticated")
    backend = MemoryBackend()
    async with client(endpoint(app, backend)) as http:
        response = await http.post(
            f"/queues/{quote(topic, safe='')}", content=body, headers=credentials
        )
    assert response.status_code in {202, 400, 401, 404, 413}, response.text
    if response.status_code == 202:
        recorded = backend.pending(topic.strip(), "topic") + len(
            backend.acked(topic.strip(), "topic")
        )
        assert recorded == max(1, len(SUBSCRIBE.get(topic.strip(), [])))
        for envelope in backend.acked(topic.strip(), "topic"):
            assert envelope.to_bytes()  # what a byte-oriented backend would send
    else:
        assert backend.queue_names("topic") == []
