"""Declaring flow limits: bad declarations raise ``ConfigError`` naming the queue or job class
and what is wrong; good ones resolve to what backends enforce."""

from __future__ import annotations

from typing import Any

import pytest

from queuey import Concurrency, ConfigError, Job, Queue, QueueSet, RateLimit
from queuey.limits import LimitSpec, parse_limit, shown_limits


def test_queue_and_job_limits_resolve() -> None:
    class Limits(QueueSet, prefix="lim"):
        work = Queue(limits=[RateLimit(14, per="1s")])

    per_tenant = [Concurrency(3, by="tenant"), RateLimit(100, per="1h", by=("tenant",))]

    class Send(Job[Limits], queue=Limits.work, name="lim.Send", limits=per_tenant):
        tenant: str

    assert Limits.work.config.limits == (LimitSpec(None, (), 14, 1.0),)
    assert Send.job_limits() == (
        LimitSpec("lim.Send", ("tenant",), 3, None),
        LimitSpec("lim.Send", ("tenant",), 100, 3600.0),
    )
    assert Send.job_limits()[1].label == "rate 100/3600s of lim.Send by tenant"
    assert Send.job_limits()[0].key_of({"tenant": "acme", "x": 1}) == '["acme"]'


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (Concurrency(3), "Bad.work: limits: expected a list"),
        ([3], "Bad.work: limits: expected Concurrency(...) or RateLimit(...), got 3"),
        ([Concurrency(0)], "Bad.work: limits: limit"),
        ([RateLimit(5, per=0.0001)], "Bad.work: limits: per: a window of at least 1ms"),
        ([RateLimit(5, per=1, burst=-1)], "Bad.work: limits: burst"),
    ],
)
def test_a_bad_queue_limit_names_the_queue(limits: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:

        class Bad(QueueSet, prefix="bad"):
            work = Queue(limits=limits)

    assert message in str(caught.value)


def test_a_job_limit_by_a_missing_field_names_the_field() -> None:
    class Fine(QueueSet, prefix="fine"):
        work = Queue()

    with pytest.raises(ConfigError, match=r"Sync: limits: by: 'tenant' is not a field of .*Sync$"):

        class Sync(Job[Fine], queue=Fine.work, limits=[Concurrency(2, by="tenant")]):
            account: int


def test_a_burst_is_kept_and_named() -> None:
    class Burst(QueueSet, prefix="burst"):
        work = Queue(limits=[RateLimit(5, per="1s", by="tenant", burst=2)])

    (spec,) = Burst.work.config.limits
    assert (spec.burst, spec.spacing) == (2, 0.2)
    assert spec.label == "rate 5/1s burst 2 by tenant"


@pytest.mark.parametrize(
    "text",
    [
        "concurrency 3",
        "rate 100/1s",
        "rate 5/0.5s of Sync by tenant",
        "rate 5/1s burst 2 by tenant",
        "concurrency 2 by a,b",
    ],
)
def test_a_limit_spelling_reads_back_as_its_label(text: str) -> None:
    spec = parse_limit(text)
    assert spec.label == text and parse_limit(spec.label) == spec


def test_the_spelling_of_several_windows_on_one_key() -> None:
    specs = [parse_limit("rate 100/1s by tenant"), parse_limit("rate  1000/1h  by tenant")]
    assert specs[1] == LimitSpec(None, ("tenant",), 1000, 3600.0)
    assert specs[0].bucket != specs[1].bucket  # each window paces its own starts
    assert shown_limits(specs) == "rate 100/1s by tenant; rate 1000/3600s by tenant"
    assert shown_limits([]) == "none" and shown_limits(None) == "declared"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rate 3", "is not a limit"),
        ("concurrency 3/1s", "is not a limit"),
        ("concurrency 3 burst 1", "is not a limit"),
        ("speed 3", "is not a limit"),
        ("rate 0/1s", "1..1,000,000"),
        ("rate 3/0.0001s", "at least 1ms"),
    ],
)
def test_a_bad_spelling_is_a_config_error_naming_it(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        parse_limit(text)
    assert repr(text) in str(raised.value)
