"""One measurement step in a fresh process: ``python -m bench.child SYSTEM ACTION [N] [X] [OPT…]``.

Actions: ``setup``, ``teardown``, ``clear``, ``single N [MS]`` (one at a time, one every MS
milliseconds), ``bulk N``, ``work N [1] [OPT…]`` (1: record each job's latency), ``timed N MS``
(one every MS milliseconds, each call's duration recorded) and ``scaled N DONE LATER`` (the
queue emptied and filled with DONE rows of jobs already run and LATER jobs scheduled an hour
ahead, then N jobs enqueued in bulk; nothing timed; ``scaled 0 0 0`` leaves an empty, vacuumed
table). ``single`` and ``bulk`` empty the queue
first (untimed), except a paced ``single``, which feeds a worker that is already running. Each
prints one JSON line on stdout.

``work`` and ``timed`` first print ``{"ready": true}`` once connected, then their result.
``work`` then waits for stdin to close, so that the parent can read the process's peak RSS
(``VmHWM``) before it exits. ``work``'s options: ``go`` (after ``ready``, wait for a line on
stdin before consuming), ``shared=PATH:INDEX:PROCESSES`` (N is the count over every worker
process of the drain, kept in ``PATH``; see ``SharedCount``), ``mark=M`` (report when M jobs
had started). ``timed`` always waits for ``go``. Times in the results are ``time.monotonic()``,
which every process of the machine shares.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any, cast

from bench.systems import Scaled, SharedCount, Tally, Timed, load

__all__ = ["main"]


def _emit(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()


def _options(args: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for arg in args:
        key, _, value = arg.partition("=")
        found[key] = value
    return found


async def _work(system: str, count: int, record: bool, options: dict[str, str]) -> dict[str, Any]:
    bench = load(system)
    shared = None
    if "shared" in options:
        path, index, processes = options["shared"].rsplit(":", 2)
        shared = SharedCount(path, int(index), int(processes))
    loop = asyncio.get_running_loop()
    tally = Tally(count, loop, record=record, shared=shared, mark=int(options.get("mark", 0)))
    marks: list[float] = []

    def ready() -> None:
        _emit({"ready": True})
        if "go" in options:
            sys.stdin.readline()
        marks.append(time.monotonic())

    watching = asyncio.create_task(tally.watch())
    await bench.work(tally, ready)
    ended = time.monotonic()
    await watching
    seconds = tally.elapsed_s or ended - marks[0]
    return {
        "seconds": seconds,
        "jobs": count,
        "mine": tally.count,
        "latencies_ms": tally.latencies_ms,
        "started_at": marks[0],
        "ended_at": ended,
        "marked_at": tally.marked_at,
    }


async def _run(system: str, action: str, args: list[str]) -> dict[str, Any]:
    count = int(args[0]) if args else 0
    number = float(args[1]) if len(args) > 1 else 0.0
    if action == "work":
        return await _work(system, count, bool(number), _options(args[2:]))
    bench = load(system)
    if action in ("setup", "teardown", "clear"):
        await getattr(bench, action)()
        return {"settings": bench.settings}
    if action in ("single", "bulk"):
        if not number:
            await bench.clear()
        seconds = await bench.enqueue(count, action == "bulk", number / 1000.0)
        return {"seconds": seconds}
    if action == "timed":

        def ready() -> None:
            _emit({"ready": True})
            sys.stdin.readline()

        calls = await cast(Timed, bench).enqueue_timed(count, number / 1000.0, ready)
        return {"calls": calls}
    if action == "scaled":
        await cast(Scaled, bench).fill(int(args[1]), int(args[2]))
        if count:
            await bench.enqueue(count, True, 0.0)
        return {"jobs": count}
    raise SystemExit(f"unknown action {action!r}")


def main(argv: list[str]) -> None:
    """Run one action and print its JSON result."""
    system, action = argv[0], argv[1]
    result = asyncio.run(_run(system, action, argv[2:]))
    _emit(result)
    if action == "work":
        sys.stdin.read()


if __name__ == "__main__":
    main(sys.argv[1:])
