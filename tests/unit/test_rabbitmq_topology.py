"""The RabbitMQ backend's pure parts: names, arguments, hold rounding, wire headers, errors."""

from __future__ import annotations

from datetime import timedelta

import pytest
from aio_pika.exceptions import ChannelPreconditionFailed
from hypothesis import given
from hypothesis import strategies as st

from queuey.backends.rabbitmq import RabbitMqOptions
from queuey.backends.rabbitmq import _topology as topology
from queuey.backends.rabbitmq._errors import precondition_message, redact, type_switch
from queuey.backends.rabbitmq._wire import (
    DELIVERY_LIMIT_REASON,
    dead_letter_of,
    dead_reason,
    envelope_message,
    malformed_message,
)
from queuey.envelope import Envelope
from queuey.errors import ConfigError
from queuey.queues import QueueConfig

SECOND = timedelta(seconds=1)


def test_names() -> None:
    assert topology.broker_name("myapp.emails") == "myapp.emails"
    assert topology.broker_name("order.paid", "topic") == "queuey-topic.order.paid"
    assert topology.dead_name("myapp.emails") == "myapp.emails.dead"
    assert topology.hold_name("myapp.emails", 30000) == "myapp.emails.hold.30000"


@pytest.mark.parametrize(
    ("delay", "granularity", "expected"),
    [
        (timedelta(seconds=30), SECOND, 30000),
        (timedelta(seconds=29.2), SECOND, 30000),
        (timedelta(milliseconds=5), SECOND, 1000),
        (timedelta(milliseconds=150), timedelta(milliseconds=100), 200),
        (timedelta(microseconds=1), timedelta(milliseconds=1), 1),
        (timedelta(milliseconds=topology.MAX_HOLD_MS), timedelta(milliseconds=1), 2147483647),
    ],
)
def test_hold_ttl_rounds_up_to_the_granularity(
    delay: timedelta, granularity: timedelta, expected: int
) -> None:
    assert topology.hold_ttl_ms(delay, granularity) == expected


@pytest.mark.parametrize(
    "delay",
    [timedelta(days=30), timedelta(milliseconds=topology.MAX_HOLD_MS + 1), timedelta(days=24.9)],
)
def test_a_delay_beyond_the_ttl_limit_is_refused(delay: timedelta) -> None:
    with pytest.raises(ConfigError, match="longer than RabbitMQ can hold"):
        topology.hold_ttl_ms(delay, timedelta(milliseconds=1))


@given(
    delay_ms=st.integers(min_value=1, max_value=10**9),
    step_ms=st.integers(min_value=1, max_value=60_000),
)
def test_hold_ttl_is_the_next_step_at_or_above_the_delay(delay_ms: int, step_ms: int) -> None:
    ttl = topology.hold_ttl_ms(timedelta(milliseconds=delay_ms), timedelta(milliseconds=step_ms))
    assert ttl % step_ms == 0
    assert delay_ms <= ttl < delay_ms + step_ms


def test_ttl_ms_rounds_up_and_refuses_what_x_message_ttl_cannot_hold() -> None:
    assert topology.ttl_ms(timedelta(microseconds=1500)) == 2
    assert topology.ttl_ms(timedelta(microseconds=1)) == 1
    assert topology.ttl_ms(timedelta(milliseconds=topology.MAX_TTL_MS)) == topology.MAX_TTL_MS
    for too_long in (timedelta(milliseconds=topology.MAX_TTL_MS + 1), timedelta(days=60)):
        with pytest.raises(ConfigError, match="longer than RabbitMQ's x-message-ttl can be"):
            topology.ttl_ms(too_long)


def test_main_arguments() -> None:
    assert topology.main_arguments(QueueConfig("app.q")) == {
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "app.q.dead",
        "x-max-priority": 10,
    }
    plain = QueueConfig("app.q", max_priority=0, message_ttl=timedelta(milliseconds=300))
    assert topology.main_arguments(plain) == {
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "app.q.dead",
        "x-message-ttl": 300,
    }
    topic = QueueConfig("order.paid", kind="topic", max_priority=0)
    assert topology.main_arguments(topic)["x-dead-letter-routing-key"] == (
        "queuey-topic.order.paid.dead"
    )


def test_hold_arguments_dead_letter_back_and_expire_when_unused() -> None:
    assert topology.hold_arguments("app.q", 1000) == {
        "x-message-ttl": 1000,
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "app.q",
        "x-expires": 2000,
    }
    longest = topology.hold_arguments("app.q", topology.MAX_HOLD_MS)["x-expires"]
    assert isinstance(longest, int) and longest <= topology.MAX_TTL_MS


def test_check_name_leaves_room_for_the_longest_hold_queue() -> None:
    topology.check_name("q" * 235)
    with pytest.raises(ConfigError, match="255-byte"):
        topology.check_name("q" * 240)


def test_envelope_message_is_persistent_json_with_priority_and_attempt_headers() -> None:
    envelope = Envelope.new("app.Job", "app.q", {"n": 1}, priority=7).deferred(9)
    message = envelope_message(envelope, {"x-last-error": "boom"})
    assert Envelope.from_bytes(message.body) == envelope
    assert message.delivery_mode == 2
    assert message.content_type == "application/json"
    assert message.message_id == envelope.job_id
    assert message.type == "app.Job"
    assert message.priority == 9
    assert message.headers == {"x-attempt": 1, "x-deferrals": 1, "x-last-error": "boom"}


def test_job_type_is_cut_to_255_bytes_on_a_character_boundary() -> None:
    envelope = Envelope.new("é" * 200, "app.q", {})
    message = envelope_message(envelope)
    assert message.type is not None and len(message.type.encode()) == 254


def test_dead_reason_prefers_ours_then_the_brokers() -> None:
    assert dead_reason({"x-death-reason": "fatal error: x"}) == "fatal error: x"
    assert dead_reason({"x-death-reason": b"bytes reason"}) == "bytes reason"
    expired = {"x-death": [{"reason": "expired", "queue": "q"}, {"reason": "expired"}]}
    assert dead_reason(expired) == "expired"
    assert dead_reason({"x-death": [{"reason": b"rejected"}]}) == "rejected"
    assert dead_reason({}) == "unknown"


def test_a_malformed_dead_letter_reads_back_as_a_placeholder() -> None:
    copy = malformed_message(b"not json", "app.q")
    assert copy.headers == {"x-death-reason": "malformed envelope", "x-original-queue": "app.q"}
    headers = dict(copy.headers)
    envelope, reason = dead_letter_of(copy.body, headers, "m-1", "app.q")
    assert reason == "malformed envelope"
    assert (envelope.job_id, envelope.job_type, envelope.queue) == ("m-1", "", "app.q")
    assert envelope.payload == "not json"


def test_redact_hides_the_password() -> None:
    assert redact("amqp://user:s3cret@host:5672/vh") == "amqp://user:***@host:5672/vh"
    assert redact("amqp://host/") == "amqp://host/"


def test_precondition_on_max_priority_says_what_to_do() -> None:
    text = (
        "PRECONDITION_FAILED - inequivalent arg 'x-max-priority' for queue 'app.q' in vhost "
        "'/': received the value '10' of type 'byte' but current is none"
    )
    message = precondition_message(ChannelPreconditionFailed(text))
    assert "'app.q'" in message
    assert "drain and delete the queue" in message
    assert "max_priority=0" in message
    other = precondition_message(
        ChannelPreconditionFailed(text.replace("x-max-priority", "x-message-ttl"))
    )
    assert "x-message-ttl" in other and "max_priority" not in other


@pytest.mark.parametrize(
    "kwargs",
    [
        {"hold_granularity": timedelta(0)},
        {"hold_granularity": timedelta(microseconds=1500)},
        {"heartbeat": timedelta(seconds=-1)},
        {"reconnect_initial": timedelta(seconds=10), "reconnect_max": timedelta(seconds=1)},
    ],
)
def test_options_are_validated(kwargs: dict[str, timedelta]) -> None:
    with pytest.raises(ConfigError, match="RabbitMqOptions"):
        RabbitMqOptions(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"queue_type": "mirrored"}, 'queue_type: must be "classic" or "quorum"'),
        ({"max_redeliveries": 0}, "max_redeliveries: expected an integer"),
        ({"max_redeliveries": True}, "max_redeliveries: expected an integer"),
    ],
)
def test_quorum_options_are_validated(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=f"RabbitMqOptions: {message}"):
        RabbitMqOptions(**kwargs)  # type: ignore[arg-type]


def test_quorum_arguments() -> None:
    quorum = topology.Quorum(delivery_limit=4)
    config = QueueConfig("app.q", max_priority=0, message_ttl=SECOND)
    assert topology.main_arguments(config, quorum) == {
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "app.q.dead",
        "x-queue-type": "quorum",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
        "x-delivery-limit": 4,
        "x-message-ttl": 1000,
    }
    assert topology.dead_arguments(quorum) == {"x-queue-type": "quorum"}
    assert topology.dead_arguments() == {}
    hold = topology.hold_arguments("app.q", 1000, quorum)
    assert hold["x-dead-letter-strategy"] == "at-least-once"
    assert hold["x-overflow"] == "reject-publish"
    assert hold["x-queue-type"] == "quorum"
    assert "x-delivery-limit" not in hold  # nobody consumes a hold queue
    assert hold["x-expires"] == 2000 + topology.QUORUM_HOLD_GRACE_MS
    longest = topology.hold_arguments("app.q", topology.MAX_HOLD_MS, quorum)["x-expires"]
    assert longest == topology.MAX_TTL_MS


def test_check_quorum_refuses_priorities_and_transient_queues() -> None:
    topology.check_quorum(QueueConfig("app.q", max_priority=0))
    with pytest.raises(ConfigError, match=r"'app\.q': max_priority=3, but quorum queues"):
        topology.check_quorum(QueueConfig("app.q", max_priority=3))
    with pytest.raises(ConfigError, match=r"'app\.q': durable=False"):
        topology.check_quorum(QueueConfig("app.q", max_priority=0, durable=False))


@pytest.mark.parametrize(
    ("argument", "received", "current", "quorum", "expected"),
    [
        ("x-max-priority", "none", "the value '10' of type 'byte'", True, "classic"),
        ("x-queue-type", "the value 'quorum' of type 'longstr'", "none", True, "classic"),
        ("x-delivery-limit", "the value '4' of type 'signedint'", "none", True, "classic"),
        ("x-queue-type", "none", "the value 'quorum' of type 'longstr'", False, "quorum"),
        ("x-delivery-limit", "the value '4' of type 'long'", "the value '2' of type 'long'",
         True, None),
        ("x-max-priority", "the value '10' of type 'byte'", "none", False, None),
    ],
)  # fmt: skip
def test_a_type_switch_is_named_with_the_way_out(
    argument: str, received: str, current: str, quorum: bool, expected: str | None
) -> None:
    text = (
        f"PRECONDITION_FAILED - inequivalent arg '{argument}' for queue 'app.q' in vhost '/': "
        f"received {received} but current is {current}"
    )
    message = type_switch(ChannelPreconditionFailed(text), quorum)
    if expected is None:
        assert message is None
        return
    assert message is not None
    assert message.startswith(f"queue 'app.q' exists as a {expected} queue")
    assert "stop the producers, let the old workers drain it" in message


def test_a_delivery_limit_death_is_spelled_out() -> None:
    deaths = {"x-death": [{"reason": "delivery_limit", "queue": "app.q", "count": 1}]}
    assert dead_reason(deaths) == DELIVERY_LIMIT_REASON
