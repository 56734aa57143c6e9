"""Publishing: one envelope per subscriber, the orphan row, and the topic rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from queuey import MemoryBackend, PayloadError, ShutDownError
from queuey.topics import InvalidTopicError, Publication, Publisher, QueuesConfig, TopicPublisher

CONFIG = QueuesConfig(
    subscribe={"user.signed_up": "send_welcome", "order.paid": ["fulfil_order", "notify_ops"]}
)


@pytest.fixture
def backend() -> MemoryBackend:
    return MemoryBackend()


async def test_one_envelope_per_subscriber_in_declared_order(backend: MemoryBackend) -> None:
    publisher: Publisher = TopicPublisher(CONFIG, backend)
    publication = await publisher.publish(" order.paid ", {"order": 7}, "user-1")
    queue = backend._queue("order.paid", "topic")
    envelopes = [item.envelope for item in queue.pending]
    assert [e.job_type for e in envelopes] == ["fulfil_order", "notify_ops"]
    assert all(e.kind == "topic" and e.queue == "order.paid" for e in envelopes)
    assert all(e.payload == {"order": 7} and e.attempt == 1 for e in envelopes)
    assert all(e.headers == {"published_by": "user-1"} for e in envelopes)
    assert len({e.job_id for e in envelopes}) == 2
    assert publication == Publication(envelopes[0].job_id, "order.paid", 2)
    assert backend.pending("order.paid") == 0  # a typed queue of the same name is untouched


async def test_a_topic_nobody_subscribes_to_is_recorded_as_handled(
    backend: MemoryBackend, caplog: pytest.LogCaptureFixture
) -> None:
    publication = await TopicPublisher(CONFIG, backend).publish("nobody.cares", [1, 2])
    assert publication.delivered == 0
    assert backend.pending("nobody.cares", "topic") == 0
    (orphan,) = backend.acked("nobody.cares", "topic")
    assert orphan.job_id == publication.id
    assert (orphan.job_type, orphan.payload, orphan.kind) == ("", [1, 2], "topic")
    assert "nobody.cares" in caplog.text and "nothing subscribes" in caplog.text
    assert backend.is_idle()


async def test_a_disabled_app_still_records(backend: MemoryBackend) -> None:
    config = QueuesConfig(enabled=False, subscribe={"t": "f"})
    publication = await TopicPublisher(config, backend).publish("t", {})
    assert publication.delivered == 1
    assert backend.pending("t", "topic") == 1


@pytest.mark.parametrize(
    "topic", ["", "   ", "order paid", "order'; DROP TABLE", "a" * 201, "ordér", 7, None]
)
async def test_an_invalid_topic_writes_nothing(backend: MemoryBackend, topic: Any) -> None:
    with pytest.raises(InvalidTopicError) as caught:
        await TopicPublisher(CONFIG, backend).publish(topic, {})
    assert isinstance(caught.value, ValueError)
    assert backend.queue_names("topic") == []


async def test_the_invalid_topic_message_lists_the_allowed_characters() -> None:
    with pytest.raises(InvalidTopicError) as caught:
        await TopicPublisher(CONFIG, MemoryBackend()).publish("order paid", {})
    assert str(caught.value) == (
        "'order paid' is not a topic: use 1 to 200 characters, each a letter, a digit, "
        "`.`, `_`, `-` or `:`"
    )


async def test_a_200_character_topic_is_fine(backend: MemoryBackend) -> None:
    publication = await TopicPublisher(CONFIG, backend).publish("a" * 200, {})
    assert publication.topic == "a" * 200


@pytest.mark.parametrize("payload", [{1, 2}, object(), float("nan"), {"x": b"bytes"}])
async def test_a_payload_that_is_not_json_writes_nothing(
    backend: MemoryBackend, payload: Any
) -> None:
    with pytest.raises(PayloadError, match=r"^topic 'order\.paid': payload.* not JSON"):
        await TopicPublisher(CONFIG, backend).publish("order.paid", payload)
    assert backend.queue_names("topic") == []


async def test_published_by_must_be_a_string(backend: MemoryBackend) -> None:
    with pytest.raises(TypeError, match="published_by"):
        await TopicPublisher(CONFIG, backend).publish("order.paid", {}, 42)  # type: ignore[arg-type]


async def test_a_closed_backend_writes_nothing(backend: MemoryBackend) -> None:
    await backend.close()
    with pytest.raises(ShutDownError):
        await TopicPublisher(CONFIG, backend).publish("order.paid", {})


def test_a_publication_serialises_as_the_seeds_json() -> None:
    publication = Publication("abc", "order.paid", 2)
    expected = '{"id": "abc", "topic": "order.paid", "delivered": 2}'
    assert json.dumps(publication.as_json()) == expected
