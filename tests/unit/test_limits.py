"""Declaring flow limits: bad declarations raise ``ConfigError`` naming the queue or job class
and what is wrong; good ones resolve to what backends enforce."""

from __future__ import annotations

from typing import Any

import pytest

from queuey import Concurrency, ConfigError, Job, Queue, QueueSet, RateLimit
from queuey.limits import LimitSpec


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
