"""A long-running command freezes its start-up heap before it runs, so the cyclic collector
no longer walks every imported module on each full collection."""

from __future__ import annotations

import gc

from queuey.cli._root import run_until_signal


async def test_a_long_running_command_runs_with_its_start_up_heap_frozen() -> None:
    gc.unfreeze()
    frozen_while_running: list[int] = []

    async def start() -> None:
        frozen_while_running.append(gc.get_freeze_count())

    try:
        await run_until_signal(start, lambda force=False: None)
    finally:
        gc.unfreeze()  # the rest of the test session collects as usual
    assert frozen_while_running and frozen_while_running[0] > 10_000
