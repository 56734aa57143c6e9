"""The benchmark harness's own machinery (no server, no timing): the handler-start count shared
by the worker processes of ``drain_2p``, the options of a ``work`` child, and the targets of
the new measurements."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench._model import MEASUREMENTS, UNITS, Run
from bench.child import _options
from bench.report import table, targets
from bench.systems import SharedCount, Tally


def test_the_shared_count_sums_every_process_counter(tmp_path: Path) -> None:
    path = tmp_path / "counts"
    path.write_bytes(bytes(16))
    first, second = SharedCount(str(path), 0, 2), SharedCount(str(path), 1, 2)
    assert first.publish(3) == 3
    assert second.publish(4) == 7
    assert first.total() == second.total() == 7


async def test_a_shared_tally_is_done_in_both_processes_once_the_sum_is_reached(
    tmp_path: Path,
) -> None:
    path = tmp_path / "counts"
    path.write_bytes(bytes(16))
    loop = asyncio.get_running_loop()
    mine = Tally(3, loop, record=False, shared=SharedCount(str(path), 0, 2), mark=2)
    other = Tally(3, loop, record=False, shared=SharedCount(str(path), 1, 2))
    watching = asyncio.create_task(mine.watch(every_s=0.001))
    mine.hit(0.0)
    other.hit(0.0)
    assert mine.marked_at is None  # the mark counts over every process: 2 was reached by other
    other.hit(0.0)
    await asyncio.wait_for(other.done.wait(), 1)
    await asyncio.wait_for(watching, 1)
    assert mine.done.is_set() and (mine.count, other.count) == (1, 2)


def test_work_options_parse_flags_and_values() -> None:
    assert _options(["go", "shared=/tmp/x:1:2", "mark=5"]) == {
        "go": "",
        "shared": "/tmp/x:1:2",
        "mark": "5",
    }


def _run(system: str, measurement: str, value: float, **settings: object) -> Run:
    return Run(system, measurement, UNITS[measurement], value, value, value, dict(settings))


def test_the_new_measurements_reach_the_table_and_the_targets() -> None:
    assert {"drain_2p", "drain_scaled", "enqueue_p99_during_drain"} <= set(MEASUREMENTS)
    runs = [
        _run("queuey-postgres", "drain", 100.0),
        _run("queuey-postgres", "drain_2p", 170.0),
        _run("queuey-postgres", "drain_scaled", 85.0, done_rows=1000, later_rows=10),
        _run("queuey-postgres", "enqueue_p99_during_drain", 4.5),
    ]
    found = {t.text: t for t in targets(runs)}
    assert found["2 processes drain ≥ 1.6x one"].met is True
    scaled = found["drain flat (within 10%) with 1,000 done and 10 later rows"]
    assert (scaled.value, scaled.met) == ("0.85x", False)
    assert "enqueue_p99_during_drain  ms" in table(runs)
