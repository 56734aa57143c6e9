"""The endpoint through httpx's ASGI transport: every status, the check order, and OpenAPI."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from starlette.applications import Starlette
from starlette.requests import HTTPConnection
from starlette.routing import Mount

from queuey.http import AccessPolicy, HttpConfig, Principal, publish_app
from queuey.http.auth import InvalidCredentialsError
from tests.unit.http.http_fakes import (
    OPS_KEY,
    SECRET,
    STAFF_KEY,
    FailingPublisher,
    RecordingPublisher,
    Row,
    app_for,
    bearer,
    client,
    http_config,
    token,
)

OPS = bearer(token(sub="olga", roles=["ops"]))
MEMBER = bearer(token(sub="mo", roles=["member"], org="acme"))
EXPIRED = bearer(token(exp_in=-10))
NOT_FOUND = {"error": "this app does not accept published messages"}


async def test_an_ops_token_publishes_one_row_per_subscriber() -> None:
    recorder = RecordingPublisher({"order.paid": ["fulfil", "notify_ops"]})
    app, _ = app_for("role:ops", recorder)
    async with client(app) as http:
        response = await http.post("/queues/order.paid", json={"order": 42}, headers=OPS)
    assert response.status_code == 202
    body = response.json()
    assert set(body) == {"id", "topic", "delivered"}
    assert (body["topic"], body["delivered"]) == ("order.paid", 2)
    assert recorder.rows == [
        Row("order.paid", "fulfil", {"order": 42}, "olga"),
        Row("order.paid", "notify_ops", {"order": 42}, "olga"),
    ]


async def test_the_done_when_matrix() -> None:
    ops_app, ops_rows = app_for("role:ops")
    default_app, default_rows = app_for("private")
    async with client(ops_app) as http:
        assert (await http.post("/queues/t", json={}, headers=OPS)).status_code == 202
        member = await http.post("/queues/t", json={}, headers=MEMBER)
        assert (member.status_code, member.json()) == (403, {"error": "forbidden"})
        anonymous = await http.post("/queues/t", json={})
        assert (anonymous.status_code, anonymous.json()) == (
            401,
            {"error": "authentication required"},
        )
        assert anonymous.headers["www-authenticate"] == "Bearer, ApiKey"
    async with client(default_app) as http:
        response = await http.post("/queues/t", json={}, headers=OPS)
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert len(ops_rows.rows) == 1
    assert default_rows.rows == []


async def test_anonymous_public_publish_records_an_empty_published_by() -> None:
    app, recorder = app_for("public")
    async with client(app) as http:
        response = await http.post("/queues/%20user:signed_up%20", content=b"")
    assert response.status_code == 202
    assert response.json()["topic"] == "user:signed_up"
    assert response.json()["delivered"] == 0
    assert recorder.rows == [Row("user:signed_up", "", {}, "")]


async def test_authenticated_with_a_bearer_token_records_the_subject() -> None:
    app, recorder = app_for("authenticated")
    async with client(app) as http:
        response = await http.post("/queues/order.paid", content=b'{"a": [1]}', headers=MEMBER)
        assert (await http.post("/queues/order.paid")).status_code == 401
    assert response.status_code == 202
    assert recorder.rows == [Row("order.paid", "", {"a": [1]}, "mo")]


@pytest.mark.parametrize(
    ("publish", "headers", "status", "error"),
    [
        ("role:ops", {"X-Api-Key": OPS_KEY}, 202, None),
        ("role:ops", {"Authorization": f"ApiKey {OPS_KEY}"}, 202, None),
        ("role:ops", {"X-Api-Key": STAFF_KEY}, 403, "forbidden"),
        ("member", {"X-Api-Key": STAFF_KEY}, 202, None),
        ("member", {"X-Api-Key": OPS_KEY}, 403, "forbidden"),
        ("role:ops", bearer(token(roles=["admin"])), 202, None),
        ("public@org_class=staff", {"X-Api-Key": STAFF_KEY}, 202, None),
        ("public@org_class=staff", {}, 401, "authentication required"),
        (
            "public@org_class=staff",
            bearer(token(org="acme", org_class="customer")),
            403,
            "requires an organisation of class `staff`",
        ),
        (
            "member@org_class=staff",
            {"X-Api-Key": OPS_KEY},
            403,
            "select an organisation: the credential does not act in one",
        ),
    ],
)
async def test_roles_and_organisation_classes(
    publish: str, headers: dict[str, str], status: int, error: str | None
) -> None:
    app, _ = app_for(publish)
    async with client(app) as http:
        response = await http.post("/queues/t", json={}, headers=headers)
    assert response.status_code == status
    if error is not None:
        assert response.json() == {"error": error}


@pytest.mark.parametrize("publish", ["public", "authenticated", "role:ops"])
@pytest.mark.parametrize(
    ("headers", "error"),
    [
        (EXPIRED, "the bearer token has expired"),
        (bearer("garbage"), "the bearer token is not valid"),
        ({"X-Api-Key": "nope"}, "unknown API key"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "unsupported Authorization scheme"),
    ],
)
async def test_invalid_credentials_are_401_even_on_a_public_route(
    publish: str, headers: dict[str, str], error: str
) -> None:
    app, recorder = app_for(publish)
    async with client(app) as http:
        response = await http.post("/queues/t", json={}, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"].startswith(error)
    assert "www-authenticate" in response.headers
    for value in headers.values():
        assert value.split()[-1] not in response.text
    assert recorder.rows == []


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
@pytest.mark.parametrize("publish", ["private", "public"])
async def test_anything_but_post_is_405_first(method: str, publish: str) -> None:
    app, _ = app_for(publish)
    async with client(app) as http:
        response = await http.request(method, "/queues/t", headers=EXPIRED)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    if method != "HEAD":
        assert response.json() == {"error": "Method Not Allowed"}


@pytest.mark.parametrize("publish", ["private", "owner", "wat", "role:", "public@org_class="])
async def test_a_closed_door_is_404_before_credentials_and_body(publish: str) -> None:
    app, recorder = app_for(publish)
    async with client(app) as http:
        for headers in ({}, OPS, EXPIRED, {"X-Api-Key": "nope"}):
            response = await http.post("/queues/bad topic", content=b"x" * 5000, headers=headers)
            assert (response.status_code, response.json()) == (404, NOT_FOUND)
        assert (await http.get("/openapi.json")).status_code == 404
    assert recorder.rows == []


async def test_403_comes_before_413_and_400() -> None:
    app, _ = app_for("role:ops")
    async with client(app) as http:
        response = await http.post("/queues/bad topic", content=b"{" * 5000, headers=MEMBER)
    assert response.status_code == 403


async def test_413_comes_before_a_bad_body_and_a_bad_topic() -> None:
    app, recorder = app_for("role:ops")
    async with client(app) as http:
        response = await http.post("/queues/bad topic", content=b"{" * 1025, headers=OPS)
        exact = await http.post("/queues/t", content=b'"' + b"x" * 1022 + b'"', headers=OPS)
    assert (response.status_code, response.json()) == (
        413,
        {"error": "the body is larger than 1024 bytes"},
    )
    assert response.headers["connection"] == "close"
    assert exact.status_code == 202
    assert len(recorder.rows) == 1


async def test_a_streamed_oversized_body_is_refused_before_it_is_read_in_full() -> None:
    pulled: list[int] = []

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(1000):
            pulled.append(1)
            yield b"x" * 100

    app, recorder = app_for("role:ops")
    async with client(app) as http:
        response = await http.post("/queues/t", content=chunks(), headers=OPS)
    assert response.status_code == 413
    assert "content-length" not in response.request.headers
    assert len(pulled) < 20
    assert recorder.rows == []


async def test_the_limit_is_configurable() -> None:
    app, _ = app_for("public", config=http_config(max_body_bytes=10))
    async with client(app) as http:
        assert (await http.post("/queues/t", content=b"[1,2,3,4,5]")).status_code == 413
        assert (await http.post("/queues/t", content=b"[1,2,3,4]")).status_code == 202


@pytest.mark.parametrize(
    "body", [b"{", b"not json", b"{'a': 1}", b"NaN", b'["\\udc00"]', b"\xff", b" "]
)
async def test_a_body_that_is_not_json_is_400_before_the_topic(body: bytes) -> None:
    app, recorder = app_for("public")
    async with client(app) as http:
        response = await http.post("/queues/bad topic", content=body)
    assert response.status_code == 400
    assert response.json()["error"].startswith("the body is not valid JSON")
    assert recorder.rows == []


@pytest.mark.parametrize(
    "topic", ["order%20paid", "order';%20DROP%20TABLE", "%20%20", "x" * 201, "caf%C3%A9", "a%00"]
)
async def test_a_bad_topic_is_400(topic: str) -> None:
    app, recorder = app_for("public")
    async with client(app) as http:
        response = await http.post(f"/queues/{topic}", json={"a": 1})
    assert response.status_code == 400
    assert "is not a topic" in response.json()["error"]
    assert recorder.rows == []


async def test_a_database_failure_is_500_with_nothing_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failing = FailingPublisher()
    app, _ = app_for("role:ops", failing)
    with caplog.at_level(logging.ERROR, logger="queuey.http"):
        async with client(app) as http:
            response = await http.post("/queues/order.paid", json={"a": 1}, headers=OPS)
    assert (response.status_code, response.json()) == (
        500,
        {"error": "the message could not be queued"},
    )
    assert failing.rows == []
    assert "order.paid" in caplog.text
    assert "127.0.0.1:5432" not in response.text


async def test_an_unreachable_database_is_503_with_retry_after() -> None:
    failing = FailingPublisher(unreachable=True)
    app, _ = app_for("role:ops", failing)
    async with client(app) as http:
        response = await http.post("/queues/order.paid", json={"a": 1}, headers=OPS)
    assert (response.status_code, response.headers["Retry-After"]) == (503, "5")
    assert response.json() == {
        "error": "the message could not be queued: the backend is unreachable, try again later"
    }
    assert failing.rows == []
    assert "127.0.0.1:5432" not in response.text


async def test_a_bad_topic_is_400_even_when_the_database_is_down() -> None:
    app, _ = app_for("public", FailingPublisher())
    async with client(app) as http:
        assert (await http.post("/queues/a%20b", json={})).status_code == 400


async def test_unknown_paths_answer_json_404() -> None:
    app, _ = app_for("public")
    async with client(app) as http:
        for path in ("/", "/queues", "/queuesx/t", "/api/queues/t", "/openapi.json/x"):
            response = await http.post(path, json={})
            assert response.status_code == 404, path
            assert response.json() == {"error": "Not Found"}


async def test_a_base_path_prefixes_every_route() -> None:
    app, recorder = app_for("public", config=http_config(base="/api"))
    async with client(app) as http:
        assert (await http.post("/api/queues/t", json={})).status_code == 202
        assert (await http.post("/queues/t", json={})).status_code == 404
        document = (await http.get("/api/openapi.json")).json()
    assert "/api/queues/{topic}" in document["paths"]
    assert len(recorder.rows) == 1


async def test_mounted_in_another_app() -> None:
    recorder = RecordingPublisher()
    inner = publish_app(http_config(), recorder, AccessPolicy.parse("role:ops"))
    outer = Starlette(routes=[Mount("/hooks", app=inner)])
    async with client(outer) as http:
        assert (await http.post("/hooks/queues/t", json={}, headers=OPS)).status_code == 202
        document = (await http.get("/hooks/openapi.json")).json()
    assert document["servers"] == [{"url": "/hooks"}]
    assert recorder.rows == [Row("t", "", {}, "olga")]


async def test_openapi_describes_the_endpoint() -> None:
    app, _ = app_for("role:ops")
    async with client(app) as http:
        response = await http.get("/openapi.json")
        post = await http.post("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1")
    operation = document["paths"]["/queues/{topic}"]["post"]
    assert set(operation["responses"]) == {
        "200",
        "202",
        "400",
        "401",
        "403",
        "409",
        "413",
        "500",
        "503",
    }
    assert [p["name"] for p in operation["parameters"]][-1] == "Idempotency-Key"
    assert "`role:ops`" in operation["description"]
    assert document["security"] == [{"bearer": []}, {"apiKey": []}]
    assert set(document["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    assert SECRET not in response.text
    assert post.status_code == 405
    assert post.json() == {"error": "Method Not Allowed"}


async def test_openapi_for_a_public_endpoint_allows_anonymous_calls() -> None:
    app, _ = app_for("public", config=HttpConfig())
    async with client(app) as http:
        document = (await http.get("/openapi.json")).json()
    assert document["security"] == [{}]


class HeaderAuthenticator:
    """A custom authenticator: trusts an ``X-User`` header, refuses ``X-User: mallory``."""

    async def authenticate(self, request: HTTPConnection) -> Principal | None:
        user = request.headers.get("x-user")
        if user == "mallory":
            raise InvalidCredentialsError("not you")
        return None if user is None else Principal(user, frozenset({"ops"}))


async def test_a_custom_authenticator_replaces_the_built_in_one() -> None:
    recorder = RecordingPublisher()
    app = publish_app(
        HttpConfig(), recorder, AccessPolicy.parse("role:ops"), authenticator=HeaderAuthenticator()
    )
    async with client(app) as http:
        assert (await http.post("/queues/t", headers={"X-User": "carol"})).status_code == 202
        assert (await http.post("/queues/t", headers={"X-User": "mallory"})).status_code == 401
        assert (await http.post("/queues/t", headers=OPS)).status_code == 401
    assert recorder.rows == [Row("t", "", {}, "carol")]


@pytest.mark.parametrize(
    ("publish", "config", "warning"),
    [
        ("wat", http_config(), "[queues] publish = 'wat' is not an access string"),
        ("owner", http_config(), "'owner' says `owner`"),
        ("role:", http_config(), "'role:' has an empty role"),
        ("role:ops", HttpConfig(), "needs credentials, but [http] configures neither"),
    ],
)
def test_start_up_warns_about_a_door_nobody_can_open(
    publish: str, config: HttpConfig, warning: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="queuey.http"):
        publish_app(config, RecordingPublisher(), AccessPolicy.parse(publish))
    assert warning in caplog.text


@pytest.mark.parametrize(
    ("publish", "config"), [("private", HttpConfig()), ("public", HttpConfig())]
)
def test_start_up_is_quiet_when_the_policy_is_clear(
    publish: str, config: HttpConfig, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="queuey.http"):
        publish_app(config, RecordingPublisher(), AccessPolicy.parse(publish))
    assert caplog.text == ""
