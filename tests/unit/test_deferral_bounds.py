"""The bounds on deferrals, as the worker decides them: the shortest hold and the cap."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from queuey import ConfigError, Defer, Envelope, MemoryBackend, RetryPolicy, Worker
from queuey._outcome import DEFERRALS, DeadLetter, DeferFor, Deferrals, decide
from tests.unit.test_seed_pins import PinQueues

POLICY = RetryPolicy.none()


def after(deferrals: int) -> Envelope:
    envelope = Envelope.new("t", "q", {})
    for _ in range(deferrals):
        envelope = envelope.deferred(10)
    return envelope


@pytest.mark.parametrize("delay", [0, "1ms", "999ms"])
def test_a_deferral_shorter_than_the_shortest_hold_is_raised_to_it(delay: Any) -> None:
    outcome = decide(after(0), Defer(delay), POLICY, 10)
    assert isinstance(outcome, DeferFor)
    assert outcome.delay == DEFERRALS.min_delay == timedelta(seconds=1)
    longer = decide(after(0), Defer("30s"), POLICY, 10)
    assert isinstance(longer, DeferFor) and longer.delay == timedelta(seconds=30)


def test_the_deferral_past_the_cap_dead_letters_saying_so() -> None:
    bounds = Deferrals(2, timedelta(milliseconds=10))
    for done in (0, 1):
        outcome = decide(after(done), Defer(0), POLICY, 10, None, bounds)
        assert isinstance(outcome, DeferFor) and outcome.delay == timedelta(milliseconds=10)
    outcome = decide(after(2), Defer(0, "busy"), POLICY, 10, None, bounds)
    assert isinstance(outcome, DeadLetter)
    assert outcome.reason.startswith("deferred 2 times, the most max_deferrals (2) allows")
    assert "(last deferral: busy)" in outcome.reason
    assert decide(after(100), Defer("1s"), POLICY, 10) == DeadLetter(
        "deferred 100 times, the most max_deferrals (100) allows: a job that keeps deferring "
        "never ends (last deferral: deferred); raise Worker(max_deferrals=...) if it waits on "
        "purpose"
    )


def test_no_deferral_is_allowed_with_a_cap_of_zero() -> None:
    outcome = decide(after(0), Defer("1s"), POLICY, 10, None, Deferrals(0))
    assert isinstance(outcome, DeadLetter)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_deferrals": -1}, "max_deferrals"),
        ({"max_deferrals": 1.5}, "max_deferrals"),
        ({"min_defer": 0}, "min_defer"),
        ({"min_defer": "soon"}, "min_defer"),
    ],
)
def test_bad_bounds_are_refused_naming_the_option(options: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Worker(PinQueues, MemoryBackend(), **options)


def test_a_worker_copy_keeps_its_bounds() -> None:
    worker = Worker(PinQueues, MemoryBackend(), max_deferrals=7, min_defer="250ms")
    assert worker.deferrals == Deferrals(7, timedelta(milliseconds=250))
    assert worker.replace(concurrency=2).deferrals == worker.deferrals
