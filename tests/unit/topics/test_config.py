"""``QueuesConfig``: the seed's fields, defaults, methods and validation rules."""

from __future__ import annotations

from typing import Any

import pytest

from queuey.errors import ConfigError
from queuey.topics import QueuesConfig


def test_defaults_are_the_seeds_with_prefix_queuey() -> None:
    config = QueuesConfig()
    assert config.enabled is True
    assert config.prefix == "queuey"
    assert dict(config.subscribe) == {}
    assert (config.poll_secs, config.batch, config.max_attempts) == (30, 10, 5)
    assert (config.retry_backoff_secs, config.lease_secs, config.retain_hours) == (10, 300, 24)
    assert config.publish == "private"
    assert config.channel() == "queuey_queue"
    assert not config.is_active()


@pytest.mark.parametrize("topic", ["order.paid", "user:signed_up", "a-b_c.d:e", "  x  ", "a" * 200])
def test_valid_topics(topic: str) -> None:
    assert QueuesConfig.valid_topic(topic)


@pytest.mark.parametrize(
    "topic",
    ["", "   ", "order paid", "order'; DROP TABLE", "a" * 201, "ordér", "a/b", "a\nb", "tab\tx"],
)
def test_invalid_topics(topic: str) -> None:
    assert not QueuesConfig.valid_topic(topic)


@pytest.mark.parametrize(
    ("prefix", "channel"),
    [
        ("myapp", "myapp_queue"),
        ("  _app_ ", "app_queue"),
        ("__", "queuey_queue"),
        ("", "queuey_queue"),
    ],
)
def test_channel_trims_the_prefix(prefix: str, channel: str) -> None:
    assert QueuesConfig(prefix=prefix).channel() == channel


@pytest.mark.parametrize("prefix", ["my-app", "1app", "a" * 58, "app name"])
def test_a_prefix_that_makes_no_identifier_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigError, match=r"queues\.prefix"):
        QueuesConfig(prefix=prefix)


def test_subscribe_takes_one_name_or_a_list_trims_and_drops_empties() -> None:
    config = QueuesConfig(
        subscribe={
            " user.signed_up ": "  send_welcome ",
            "order.paid": ["fulfil_order", " notify_ops", "", "  "],
            "ignored": [],
            "blank": "   ",
        }
    )
    assert dict(config.subscribe) == {
        "user.signed_up": ("send_welcome",),
        "order.paid": ("fulfil_order", "notify_ops"),
    }
    assert config.topics() == ("user.signed_up", "order.paid")
    assert config.subscribers(" order.paid ") == ("fulfil_order", "notify_ops")
    assert config.subscribers("nobody.listens") == ()
    assert config.subscribed_functions() == ("fulfil_order", "notify_ops", "send_welcome")
    assert config.is_active()


def test_duplicate_names_are_dropped_keeping_the_first() -> None:
    config = QueuesConfig(subscribe={"t": ["b", "a", "b", " a "], " t": ["c", "a"]})
    assert config.subscribers("t") == ("b", "a", "c")


def test_a_disabled_app_is_not_active_but_keeps_its_subscriptions() -> None:
    config = QueuesConfig(enabled=False, subscribe={"t": "f"})
    assert not config.is_active()
    assert config.subscribers("t") == ("f",)


def test_subscribe_cannot_be_changed_after_construction() -> None:
    config = QueuesConfig(subscribe={"t": "f"})
    with pytest.raises(TypeError):
        config.subscribe["u"] = ("g",)  # type: ignore[index]


def test_publish_access_is_the_raw_string_trimmed() -> None:
    assert QueuesConfig().publish_access() == "private"
    assert QueuesConfig(publish=" role:admin@org_class=staff ").publish_access() == (
        "role:admin@org_class=staff"
    )
    assert QueuesConfig(publish="wat").publish_access() == "wat"


def test_retry_delay_doubles_from_the_base_and_caps_at_an_hour() -> None:
    config = QueuesConfig()
    assert [config.retry_delay_secs(n) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 80, 160]
    assert config.retry_delay_secs(0) == 10
    assert config.retry_delay_secs(-3) == 10
    assert config.retry_delay_secs(9) == 2560
    assert config.retry_delay_secs(10) == 3600
    assert config.retry_delay_secs(50) == 3600
    assert config.retry_delay_secs(2**32 - 1) == 3600


def test_a_zero_base_retries_at_once() -> None:
    config = QueuesConfig(retry_backoff_secs=0)
    assert [config.retry_delay_secs(n) for n in (1, 2, 64, 65, 2**32 - 1)] == [0, 0, 0, 0, 0]


def test_zero_retain_hours_and_zero_backoff_are_valid() -> None:
    config = QueuesConfig(retain_hours=0, retry_backoff_secs=0)
    assert (config.retain_hours, config.retry_backoff_secs) == (0, 0)


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"poll_secs": 0}, "queues.poll_secs"),
        ({"batch": 0}, "queues.batch"),
        ({"lease_secs": 0}, "queues.lease_secs"),
        ({"publish_timeout_secs": 0}, "queues.publish_timeout_secs"),
        ({"max_attempts": 0}, "queues.max_attempts"),
        ({"retry_backoff_secs": -1}, "queues.retry_backoff_secs"),
        ({"retain_hours": -1}, "queues.retain_hours"),
        ({"poll_secs": -5}, "queues.poll_secs"),
        ({"batch": 70000}, "queues.batch"),
        ({"lease_secs": 2**40}, "queues.lease_secs"),
        ({"poll_secs": "30"}, "queues.poll_secs"),
        ({"batch": 1.5}, "queues.batch"),
        ({"max_attempts": True}, "queues.max_attempts"),
        ({"enabled": "yes"}, "queues.enabled"),
        ({"prefix": 3}, "queues.prefix"),
        ({"publish": ["public"]}, "queues.publish"),
        ({"subscribe": ["t"]}, "queues.subscribe"),
        ({"subscribe": {"order paid": "f"}}, "queues.subscribe"),
        ({"subscribe": {"": "f"}}, "queues.subscribe"),
        ({"subscribe": {"t": 3}}, 'queues.subscribe."t"'),
        ({"subscribe": {"t": ["f", 3]}}, 'queues.subscribe."t"'),
        ({"subscribe": {"t": {"f": 1}}}, 'queues.subscribe."t"'),
    ],
)
def test_bad_values_are_config_errors_naming_the_key(options: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        QueuesConfig(**options)
    assert str(caught.value).startswith(key)


def test_an_invalid_topic_key_is_named_in_the_error() -> None:
    with pytest.raises(ConfigError, match="'order paid' is not a topic"):
        QueuesConfig(subscribe={"order paid": "f"})
