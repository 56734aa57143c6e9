"""Topics: ``[queues.schedule]`` in the app file (errors naming the key and the file), topic
schedules published by the subscriber under virtual time, and ``publish(key=...)`` in memory."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from queuey import ConfigError, MemoryBackend
from queuey.topics import App, QueuesConfig, TopicPublisher, load_app_config
from queuey.topics.publication import IdempotencyConflictError
from queuey.topics.schedule import TopicSchedule

APP = """
[queues]
prefix = "shop"
idempotency_hours = 2

[queues.subscribe]
"report.nightly" = "build_report"

[queues.schedule]
"report.nightly" = { cron = "0 3 * * *", tz = "UTC", payload = { kind = "daily" } }
"cache.refresh" = { every = "10m", catch_up = "none" }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "app.toml"
    path.write_text(text)
    return path


def test_the_schedule_table_is_read(tmp_path: Path) -> None:
    config = load_app_config(write(tmp_path, APP)).queues
    assert config.idempotency_hours == 2
    nightly = config.schedule["report.nightly"]
    assert isinstance(nightly, TopicSchedule)
    assert (nightly.name, nightly.topic, nightly.payload) == (
        "shop:report.nightly",
        "report.nightly",
        {"kind": "daily"},
    )
    assert nightly.timing.expression() == "0 3 * * *"
    refresh = config.schedule["cache.refresh"]
    assert (refresh.timing.expression(), refresh.catch_up, refresh.payload) == (
        "every 600s",
        "none",
        {},
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('"a.b" = { cron = "99 * * * *" }', r'queues.schedule."a.b".cron: invalid cron'),
        ('"a.b" = { cron = "0 3 * * *", tz = "Nowhere/City" }', r'"a.b".tz: unknown time zone'),
        ('"a.b" = { every = "10m", when = 3 }', r'queues.schedule."a.b".when: not a schedule'),
        ('"a.b" = "0 3 * * *"', r'queues.schedule."a.b": expected a table'),
        ('"a b" = { every = "1m" }', r"queues.schedule: 'a b' is not a topic"),
        ('"a.b" = { payload = 1 }', r'queues.schedule."a.b": give exactly one of cron'),
    ],
)
def test_a_bad_schedule_names_the_key_and_the_file(
    tmp_path: Path, entry: str, message: str
) -> None:
    path = write(tmp_path, f"[queues.schedule]\n{entry}\n")
    with pytest.raises(ConfigError, match=message) as caught:
        load_app_config(path)
    assert str(caught.value).startswith(str(path))


@pytest.mark.looptime
async def test_the_subscriber_publishes_each_slot_once() -> None:
    config = QueuesConfig(
        subscribe={"tick": ["count"]},
        schedule={"tick": {"every": "1m", "payload": {"n": 1}}},  # type: ignore[dict-item]
    )
    backend = MemoryBackend(start=datetime(2024, 5, 1, 12, 0, 30, tzinfo=UTC))
    apps = [App(config) for _ in range(2)]
    seen: list[Any] = []
    for app in apps:
        app.register("count", seen.append)
    subscribers = [app.subscriber(backend) for app in apps]
    tasks = [asyncio.create_task(s.run()) for s in subscribers]
    await asyncio.sleep(600)
    for s in subscribers:
        s.shutdown()
    await asyncio.gather(*tasks)
    assert seen == [{"n": 1}] * 10


async def test_publish_with_a_key_in_memory() -> None:
    backend = MemoryBackend()
    publisher = TopicPublisher(QueuesConfig(subscribe={"t": ["a", "b"]}), backend)
    first = await publisher.publish("t", {"x": 1}, key="k")
    again = await publisher.publish("t", {"x": 1}, key="k")
    assert not first.replayed and again.replayed and again.id == first.id
    assert again.as_json() == first.as_json() == {"id": first.id, "topic": "t", "delivered": 2}
    assert backend.pending("t", "topic") == 2
    with pytest.raises(IdempotencyConflictError):
        await publisher.publish("t", {"x": 2}, key="k")
    with pytest.raises(ValueError, match="1 to 255"):
        await publisher.publish("t", {}, key="")
