"""The heartbeat's statement choice (``Maintenance.beat``): nothing held builds no statement (no
coroutine left unawaited), progress reported for a held row rides on the beat
(``extend_progress``), and a report for a row no longer held is dropped."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, cast

from queuey.backends.postgres._maintenance import Maintenance, MaintenanceOptions
from queuey.backends.postgres._outage import Outage


class FakeStore:
    def __init__(self) -> None:
        self.calls: list[tuple[str, set[str], dict[str, str]]] = []

    def extend(self, ids: Collection[str]) -> Any:
        self.calls.append(("extend", set(ids), {}))
        return self._answer(ids)

    def extend_progress(self, ids: Collection[str], progress: dict[str, str]) -> Any:
        self.calls.append(("extend_progress", set(ids), dict(progress)))
        return self._answer(ids)

    async def _answer(self, ids: Collection[str]) -> dict[str, bool]:
        return dict.fromkeys(ids, False)


def maintenance(store: FakeStore, held: set[str], progress: dict[str, str]) -> Maintenance:
    options = MaintenanceOptions(lease=30.0, poll_interval=5.0, max_redeliveries=5, retain=None)
    return Maintenance(
        cast(Any, store), held, options, Outage("test"), lambda: None, progress=progress
    )


async def test_nothing_held_builds_no_statement() -> None:
    store = FakeStore()
    await maintenance(store, set(), {"gone": "{}"}).beat()
    assert store.calls == []


async def test_progress_rides_on_the_beat_and_a_released_rows_is_dropped() -> None:
    store = FakeStore()
    progress = {"a": '{"fraction":0.5}', "gone": '{"fraction":0.1}'}
    beat = maintenance(store, {"a", "b"}, progress)
    await beat.beat()
    await beat.beat()
    assert store.calls == [
        ("extend_progress", {"a", "b"}, {"a": '{"fraction":0.5}'}),
        ("extend", {"a", "b"}, {}),
    ]
    assert progress == {}
