"""A backend's broker URLs: one or a cluster's, validated, tried in turn, never shown with a
password."""

from __future__ import annotations

import pytest

from queuey.backends.rabbitmq._urls import Brokers
from queuey.errors import ConfigError

A = "amqp://app:s3cret@rabbit-1:5672/vh"
B = "amqp://app:s3cret@rabbit-2:5672/vh"
C = "amqps://app:other@rabbit-3/vh"


@pytest.mark.parametrize(
    "given",
    [[A, B, C], (A, B, C), f"{A},{B},{C}", f"{A}, {B} {C}", f" {A}\n{B},\t{C} "],
)
def test_several_urls_are_read_in_order(given: str | list[str]) -> None:
    assert Brokers(given).urls == (A, B, C)


def test_one_url_stays_one() -> None:
    brokers = Brokers("amqp://guest:pa,ss@host/")  # a comma inside a URL is not a separator
    assert brokers.urls == ("amqp://guest:pa,ss@host/",)


def test_the_turn_starts_with_the_url_in_use_or_after_a_loss_the_next() -> None:
    brokers = Brokers([A, B, C])
    assert brokers.turn(after_loss=False) == [0, 1, 2]
    brokers.current = 1
    assert brokers.turn(after_loss=False) == [1, 2, 0]
    assert brokers.turn(after_loss=True) == [2, 0, 1]
    assert Brokers(A).turn(after_loss=True) == [0]


def test_passwords_are_never_shown() -> None:
    brokers = Brokers([A, C])
    assert brokers.safe_url == "amqp://app:***@rabbit-1:5672/vh"
    assert brokers.described() == "amqp://app:***@rabbit-1:5672/vh, amqps://app:***@rabbit-3/vh"
    assert brokers.password == "s3cret"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ([], "no AMQP URL given"),
        ("", "no AMQP URL given"),
        ([A, "http://x:secret@host/"], "AMQP URL 'http://x:***@host/' is not of the form"),
        ([A, ""], "no AMQP URL given"),
    ],
)
def test_bad_urls_are_refused_naming_them(given: str | list[str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Brokers(given)
    assert str(caught.value).startswith(message)
    assert "secret" not in str(caught.value)
