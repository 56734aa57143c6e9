"""Fuzzing topic paths, bodies, credentials and policies: the endpoint never answers 500 except
for the injected database failure, and a rejected request never writes a row."""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queuey.topics.publication import InvalidTopicError
from tests.unit.http.http_fakes import (
    OPS_KEY,
    STAFF_KEY,
    FailingPublisher,
    RecordingPublisher,
    app_for,
    bearer,
    check_topic,
    client,
    http_config,
    token,
)

LIMIT = 512
FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SUBSCRIBE = {"order.paid": ["fulfil", "notify_ops"], "user:signed_up": ["welcome"]}
POLICIES = [
    "public",
    "authenticated",
    "member",
    "role:ops",
    "private",
    "owner",
    "role:",
    "public@org_class=staff",
    "Public",
]
CREDENTIALS: list[dict[str, str]] = [
    {},
    bearer(token(roles=["ops"])),
    bearer(token(roles=["member"], org="acme")),
    bearer(token(exp_in=-1)),
    bearer("x.y.z"),
    {"X-Api-Key": OPS_KEY},
    {"X-Api-Key": STAFF_KEY},
    {"X-Api-Key": "nope"},
    {"Authorization": "Basic Zm9vOmJhcg=="},
]

no_surrogates = st.characters(exclude_categories=["Cs"])
topics = st.one_of(
    st.sampled_from([*SUBSCRIBE, "nobody.listens", " order.paid ", "a" * 200, "a" * 201]),
    st.from_regex(r"[A-Za-z0-9._:-]{1,30}", fullmatch=True),
    st.text(no_surrogates, max_size=40),
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    # lone surrogates too: st.text() never draws them
    st.lists(st.characters() | st.characters(categories=["Cs"]), max_size=5).map("".join),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
bodies = st.one_of(
    st.just(b""),
    st.binary(max_size=LIMIT + 50),
    json_values.map(lambda value: json.dumps(value).encode()),
    json_values.map(lambda value: json.dumps(value, ensure_ascii=False).encode("utf-8", "replace")),
    st.integers(0, 300).map(lambda depth: b"[" * depth + b"]" * depth),
    st.integers(0, 300).map(lambda depth: b'{"a":' * depth + b"1" + b"}" * depth),
)


def expected_message(body: bytes) -> Any:
    return {} if not body else json.loads(body)


def is_topic(topic: str) -> bool:
    try:
        check_topic(topic)
    except InvalidTopicError:
        return False
    return True


@FUZZ
@given(
    policy=st.sampled_from(POLICIES),
    credentials=st.sampled_from(CREDENTIALS),
    topic=topics,
    body=bodies,
)
async def test_no_500_and_no_row_on_a_rejected_request(
    policy: str, credentials: dict[str, str], topic: str, body: bytes
) -> None:
    recorder = RecordingPublisher(SUBSCRIBE)
    app, _ = app_for(policy, recorder, config=http_config(max_body_bytes=LIMIT))
    async with client(app) as http:
        response = await http.post(
            f"/queues/{quote(topic, safe='')}", content=body, headers=credentials
        )
    assert response.status_code in {202, 400, 401, 403, 404, 413}, response.text
    if response.status_code != 202:
        assert recorder.rows == []
        assert list(response.json()) == ["error"]
        return
    published = response.json()
    assert is_topic(topic) and len(body) <= LIMIT
    assert published["topic"] == topic.strip()
    subscribers = SUBSCRIBE.get(topic.strip(), [""])
    assert [row.subscriber for row in recorder.rows] == subscribers
    message = expected_message(body)
    assert all(_same(row.payload, message) for row in recorder.rows)


@FUZZ
@given(body=bodies, topic=st.sampled_from([*SUBSCRIBE, "nobody.listens"]))
async def test_any_body_to_a_good_topic_is_queued_or_refused_as_400(
    body: bytes, topic: str
) -> None:
    recorder = RecordingPublisher(SUBSCRIBE)
    app, _ = app_for("public", recorder, config=http_config(max_body_bytes=LIMIT))
    async with client(app) as http:
        response = await http.post(f"/queues/{topic}", content=body)
    assert response.status_code in {202, 400, 413}, response.text
    if response.status_code == 202:
        assert all(_same(row.payload, expected_message(body)) for row in recorder.rows)
        assert len(recorder.rows) == len(SUBSCRIBE.get(topic, [""]))
    else:
        assert recorder.rows == []


@FUZZ
@given(topic=topics, body=bodies)
async def test_only_the_database_failure_answers_500(topic: str, body: bytes) -> None:
    failing = FailingPublisher()
    app, _ = app_for("public", failing, config=http_config(max_body_bytes=LIMIT))
    async with client(app) as http:
        response = await http.post(f"/queues/{quote(topic, safe='')}", content=body)
    assert response.status_code in {400, 404, 413, 500}
    assert failing.rows == []
    if response.status_code == 500:
        assert response.json() == {"error": "the message could not be queued"}
        assert is_topic(topic) and len(body) <= LIMIT


def _same(left: Any, right: Any) -> bool:
    """Equality that treats -0.0 and 0.0 alike and checks floats are finite."""
    if isinstance(left, float):
        return math.isfinite(left) and left == right
    return bool(left == right)
