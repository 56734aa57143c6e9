"""One measurement step in a fresh process: ``python -m bench.child SYSTEM ACTION [N] [X]``.

Actions: ``setup``, ``teardown``, ``clear``, ``single N [MS]`` (one at a time, one every MS
milliseconds), ``bulk N`` and ``work N [1]`` (1: record each job's latency). ``single`` and
``bulk`` empty the queue first (untimed), except a paced ``single``, which feeds a worker that
is already running. Each prints one JSON line on stdout. ``work`` first prints
``{"ready": true}`` once its worker is connected, then its result, and then waits for stdin to
close, so that the parent can read the process's peak RSS (``VmHWM``) before it exits.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from bench.systems import Tally, load

__all__ = ["main"]


def _emit(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()


async def _run(system: str, action: str, count: int, interval_ms: float) -> dict[str, Any]:
    bench = load(system)
    if action in ("setup", "teardown", "clear"):
        await getattr(bench, action)()
        return {"settings": bench.settings}
    if action in ("single", "bulk"):
        if not interval_ms:
            await bench.clear()
        seconds = await bench.enqueue(count, action == "bulk", interval_ms / 1000.0)
        return {"seconds": seconds}
    if action == "work":
        tally = Tally(count, asyncio.get_running_loop(), record=bool(interval_ms))
        marks: list[float] = []

        def ready() -> None:
            marks.append(time.perf_counter())
            _emit({"ready": True})

        await bench.work(tally, ready)
        seconds = tally.elapsed_s or time.perf_counter() - marks[0]
        return {"seconds": seconds, "jobs": count, "latencies_ms": tally.latencies_ms}
    raise SystemExit(f"unknown action {action!r}")


def main(argv: list[str]) -> None:
    """Run one action and print its JSON result."""
    system, action = argv[0], argv[1]
    count = int(argv[2]) if len(argv) > 2 else 0
    interval_ms = float(argv[3]) if len(argv) > 3 else 0.0
    result = asyncio.run(_run(system, action, count, interval_ms))
    _emit(result)
    if action == "work":
        sys.stdin.read()


if __name__ == "__main__":
    main(sys.argv[1:])
