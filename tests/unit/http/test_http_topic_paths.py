"""Whatever follows ``/queues/`` is the topic: a malformed topic path (an encoded or plain slash,
an empty topic, a newline, an invalid character, an overlong topic) is the documented 400 for a
bad topic, after the checks that come first (405, 404/401/403, 413, a bad body), never the
router's 404."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.http.http_fakes import (
    RecordingPublisher,
    app_for,
    bearer,
    client,
    http_config,
    token,
)
from tests.unit.http.test_http_fuzz import FUZZ, is_topic

OPS = bearer(token(sub="olga", roles=["ops"]))
MEMBER = bearer(token(sub="mo", roles=["member"], org="acme"))
MALFORMED = [
    "a%2Fb",  # an encoded slash
    "a%2fb",
    "%2F",
    "a/b",  # an extra segment
    "a/b/c",
    "t/",
    "/t",
    "",  # no topic at all
    "%20",
    "a%0Ab",  # a newline inside (one around the topic is trimmed, as any whitespace)
    "order%3Fpaid",  # an encoded ? and #
    "order%23paid",
    "a%25b",
    "a;b",
    "caf%C3%A9",
    "x" * 201,
]
# Characters that mean something in a path, a query, an encoding or to the topic rule.
PATH_SIGNIFICANT = st.sampled_from([*"/%?#.;:=&+ \n\t\\_-~", "%2F", "%2f", "..", "é"])
path_topics = st.lists(
    st.one_of(PATH_SIGNIFICANT, st.sampled_from(list("abc09")), st.text(max_size=3)),
    max_size=12,
).map("".join)


def encoded(topic: str, *, keep_slashes: bool) -> str:
    """``topic`` as a path segment (or, keeping slashes, as several), dots escaped so that no
    client folds ``.`` or ``..`` segments away."""
    return quote(topic, safe="/" if keep_slashes else "").replace(".", "%2E")


def is_bad_topic(response_json: object) -> bool:
    return (
        isinstance(response_json, dict)
        and list(response_json) == ["error"]
        and "is not a topic" in response_json["error"]
    )


@pytest.mark.parametrize("path", MALFORMED)
async def test_a_malformed_topic_path_is_400(path: str) -> None:
    app, recorder = app_for("public")
    async with client(app) as http:
        response = await http.post(f"/queues/{path}", json={"a": 1})
    assert response.status_code == 400, response.text
    assert is_bad_topic(response.json()), response.text
    assert recorder.rows == []


@pytest.mark.parametrize("path", ["a%2Fb", "a/b", "", "t/"])
async def test_checks_before_the_topic_still_come_first(path: str) -> None:
    url = f"/queues/{path}"
    app, recorder = app_for("role:ops")
    async with client(app) as http:
        wrong_method = await http.get(url, headers=OPS)
        anonymous = await http.post(url, json={})
        member = await http.post(url, json={}, headers=MEMBER)
        too_large = await http.post(url, content=b"[" + b"1," * 600 + b"1]", headers=OPS)
        not_json = await http.post(url, content=b"{", headers=OPS)
        bad_topic = await http.post(url, content=b"{}", headers=OPS)
    assert (wrong_method.status_code, wrong_method.headers["allow"]) == (405, "POST")
    assert anonymous.status_code == 401
    assert member.status_code == 403
    assert too_large.status_code == 413
    assert not_json.status_code == 400
    assert not_json.json()["error"].startswith("the body is not valid JSON")
    assert bad_topic.status_code == 400 and is_bad_topic(bad_topic.json())
    closed, _ = app_for("private")
    async with client(closed) as http:
        assert (await http.post(url, json={}, headers=OPS)).status_code == 404
    assert recorder.rows == []


async def test_a_base_path_keeps_its_own_404s() -> None:
    app, _ = app_for("public", config=http_config(base="/api"))
    async with client(app) as http:
        assert (await http.post("/api/queues/a%2Fb", json={})).status_code == 400
        for path in ("/queues/a%2Fb", "/api/queues", "/api/queuesx/t", "/other/queues/t"):
            response = await http.post(path, json={})
            assert (response.status_code, response.json()) == (404, {"error": "Not Found"}), path


@FUZZ
@given(topic=path_topics, keep_slashes=st.booleans())
async def test_any_topic_path_is_202_for_a_topic_and_400_otherwise(
    topic: str, keep_slashes: bool
) -> None:
    recorder = RecordingPublisher({"order.paid": ["fulfil"]})
    app, _ = app_for("public", recorder)
    async with client(app) as http:
        response = await http.post(f"/queues/{encoded(topic, keep_slashes=keep_slashes)}")
    if is_topic(topic):
        assert response.status_code == 202, response.text
        assert response.json()["topic"] == topic.strip()
        assert recorder.rows
    else:
        assert response.status_code == 400, (topic, response.text)
        assert is_bad_topic(response.json()), response.text
        assert recorder.rows == []
