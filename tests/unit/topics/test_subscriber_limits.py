"""``[queues.limits]``: flow limits per subscriber, read from the app's TOML table: each topic
queue carries its subscribers' limits (job type: the subscriber), and bad values are a
``ConfigError`` naming the key and what to write instead. On the memory backend the limits
hold: a subscriber capped at one message at a time never runs two at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from queuey import ConfigError
from queuey.backends.memory import MemoryBackend
from queuey.limits import LimitSpec
from queuey.topics import App, QueuesConfig
from queuey.topics.subscriber import topic_queue

SUBSCRIBE = {"order.paid": ["fulfil", "notify"], "order.shipped": "fulfil"}


def test_each_topic_queue_carries_its_subscribers_limits() -> None:
    config = QueuesConfig(
        subscribe=SUBSCRIBE,
        limits={"fulfil": ["rate 14/1s", "concurrency 3 by tenant"], "notify": "concurrency 1"},
    )
    paid = topic_queue("order.paid", config)
    assert paid.limits == (
        LimitSpec("fulfil", (), 14, 1.0),
        LimitSpec("fulfil", ("tenant",), 3, None),
        LimitSpec("notify", (), 1, None),
    )
    assert topic_queue("order.shipped", config).limits == paid.limits[:2]


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ("rate 1/1s", r"queues\.limits: expected a table of subscriber = limits"),
        ({"ship": "rate 1/1s"}, r'queues\.limits\."ship": not a subscriber: .* fulfil, notify'),
        ({"fulfil": 3}, r'queues\.limits\."fulfil": expected a limit or a list of limits'),
        ({"fulfil": []}, r'queues\.limits\."fulfil": expected a limit or a list of limits'),
        ({"fulfil": [3]}, r"expected a limit such as 'rate 14/1s', got 3"),
        ({"fulfil": "rate 3"}, r"queues\.limits\.\"fulfil\": 'rate 3' is not a limit"),
        ({"fulfil": "concurrency 0"}, r"the limit must be 1\.\.1,000,000"),
        ({"fulfil": "concurrency 2 of Other"}, r"leave out 'of Other'"),
    ],
)
def test_bad_limits_name_the_key(limits: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        QueuesConfig(subscribe=SUBSCRIBE, limits=limits)


async def test_a_subscriber_capped_at_one_never_runs_two_at_once() -> None:
    config = QueuesConfig(subscribe={"t": "slow"}, limits={"slow": "concurrency 1"}, batch=8)
    app = App(config)
    running, peak, done = [0], [0], []

    async def slow(payload: Any) -> None:
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0.02)
        running[0] -= 1
        done.append(payload)

    app.register("slow", slow)
    backend = MemoryBackend()
    for n in range(6):
        await app.publisher(backend).publish("t", n)
    subscriber = app.subscriber(backend, concurrency=8)
    task = asyncio.create_task(subscriber.run())
    try:
        async with asyncio.timeout(10):
            while len(done) < 6:
                await asyncio.sleep(0.01)
    finally:
        subscriber.shutdown()
        await task
    assert sorted(done) == list(range(6)) and peak[0] == 1


def test_limits_are_read_from_the_app_file(tmp_path: Any) -> None:
    from queuey.topics import load_app_config

    path = tmp_path / "app.toml"
    path.write_text(
        '[queues]\nprefix = "shop"\n[queues.subscribe]\n"order.paid" = "fulfil"\n'
        '[queues.limits]\nfulfil = ["rate 5/1s burst 2 by tenant"]\n'
    )
    config = load_app_config(str(path)).queues
    assert topic_queue("order.paid", config).limits == (
        LimitSpec("fulfil", ("tenant",), 5, 1.0, 2),
    )
    path.write_text(path.read_text().replace("rate 5/1s", "rate 5 per second"))
    with pytest.raises(ConfigError, match=r'queues\.limits\."fulfil": .* is not a limit'):
        load_app_config(str(path))
