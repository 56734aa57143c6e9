"""Every declared duration and runtime delay is at most ``MAX_DURATION`` (3650 days), refused
with a ``ConfigError`` naming it (at class creation for declarations), and each backend says
how long a delay it can hold (``max_delay``)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queuey import (
    ConfigError,
    Defer,
    Job,
    MemoryBackend,
    Queue,
    QueueSet,
    RetryPolicy,
    Worker,
    parse_delay,
    parse_duration,
)
from queuey.backends.postgres import PostgresBackend
from queuey.backends.rabbitmq import RabbitMqBackend, RabbitMqOptions
from queuey.durations import MAX_DURATION

TOO_LONG = re.escape("longer than the longest duration queuey takes (3650 days, about 10 years)")
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def test_the_bound_itself_is_accepted_and_a_millisecond_more_is_not() -> None:
    assert parse_duration(MAX_DURATION) == MAX_DURATION
    assert parse_delay("3650d") == MAX_DURATION
    for value in (MAX_DURATION + timedelta(milliseconds=1), "3651d", 3650 * 86400 + 1, 1e300):
        with pytest.raises(ConfigError, match=TOO_LONG):
            parse_duration(value)
        with pytest.raises(ConfigError, match=TOO_LONG):
            parse_delay(value)
    with pytest.raises(ConfigError, match=TOO_LONG):
        parse_delay(timedelta.max)
    with pytest.raises(ConfigError):
        parse_delay(timedelta.min)


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(sorted(UNITS)))
def test_any_duration_is_taken_up_to_the_bound_and_refused_beyond(amount: int, unit: str) -> None:
    seconds = amount * UNITS[unit]
    for spelled in (f"{amount}{unit}", seconds):
        if seconds > MAX_DURATION.total_seconds():
            with pytest.raises(ConfigError, match=TOO_LONG):
                parse_delay(spelled)
            with pytest.raises(ConfigError, match=f"^Defer delay: .*{TOO_LONG}"):
                Defer(spelled)
        else:
            assert parse_delay(spelled).total_seconds() == pytest.approx(seconds)
            assert Defer(spelled).delay == parse_delay(spelled)


@pytest.mark.parametrize(
    ("policy", "option"),
    [
        (lambda: RetryPolicy.fixed(3, "999999999d"), "retry delay"),
        (lambda: RetryPolicy.exponential(3, base="1s", max="3651d"), "retry max"),
        (lambda: RetryPolicy.exponential(3, base="4000d", max="4000d"), "retry base"),
        (lambda: RetryPolicy(max=timedelta(days=3651)), "retry max"),
    ],
)
def test_a_retry_policy_beyond_the_bound_fails_at_class_creation(policy: Any, option: str) -> None:
    assert policy().problem is not None
    with pytest.raises(ConfigError, match=f"^Bounded.q: {option}: .*3650 days"):

        class Bounded(QueueSet):
            q = Queue(retry=policy())

    class Fine(QueueSet):
        q = Queue()

    with pytest.raises(ConfigError, match=f"Slow: {option}: .*3650 days"):

        class Slow(Job[Fine], queue=Fine.q, retry=policy()):
            pass


def test_declared_durations_beyond_the_bound_fail_where_they_are_declared() -> None:
    with pytest.raises(ConfigError, match=f"^Ttl.q: message_ttl: .*{TOO_LONG}"):

        class Ttl(QueueSet):
            q = Queue(message_ttl="3651d")

    class Set(QueueSet):
        q = Queue()

    with pytest.raises(ConfigError, match=f"^job_timeout: .*{TOO_LONG}"):
        Worker(Set, MemoryBackend(), job_timeout="999999d")
    with pytest.raises(ConfigError, match=f"^lease: .*{TOO_LONG}"):
        PostgresBackend("postgresql://nobody@127.0.0.1:1/none", lease="3651d")
    with pytest.raises(ConfigError, match=f"^poll_interval: .*{TOO_LONG}"):
        PostgresBackend("postgresql://nobody@127.0.0.1:1/none", poll_interval=10**12)


def test_each_backend_says_how_long_a_delay_it_holds() -> None:
    assert MemoryBackend.max_delay == MAX_DURATION
    assert PostgresBackend.max_delay == MAX_DURATION
    rabbit = RabbitMqBackend("amqp://guest:guest@127.0.0.1:5672/")
    assert rabbit.max_delay == timedelta(milliseconds=2_147_483_000)  # whole seconds
    fine = RabbitMqBackend(
        "amqp://guest:guest@127.0.0.1:5672/",
        RabbitMqOptions(hold_granularity=timedelta(milliseconds=1)),
    )
    assert fine.max_delay == timedelta(milliseconds=2_147_483_647)


@pytest.mark.parametrize(
    ("policy", "longest"),
    [
        (RetryPolicy.none(5), timedelta(0)),
        (RetryPolicy.fixed(1, "1h"), timedelta(0)),  # never retries
        (RetryPolicy.fixed(3, "1h"), timedelta(hours=1)),
        (RetryPolicy.exponential(3, base="1s", max="1h"), timedelta(seconds=2)),
        (RetryPolicy.exponential(30, base="1s", max="1h"), timedelta(hours=1)),
        (RetryPolicy.exponential(5, base="1m", factor=0.5, max="1h"), timedelta(minutes=1)),
    ],
)
def test_the_longest_wait_of_a_policy(policy: RetryPolicy, longest: timedelta) -> None:
    assert policy.longest_wait == longest
