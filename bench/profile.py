"""Profile one system's step with pyinstrument:
``python -m bench.profile SYSTEM {drain,single,bulk,latency} N [--out FILE]``.

``drain`` pre-enqueues N jobs (not profiled) and profiles the worker draining them; ``latency``
profiles an idle worker fed one job every 10 ms by a producer in another process. The text
report (slowest paths first) goes to stdout or ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

from pyinstrument import Profiler

from bench.systems import Tally, load

__all__ = ["main"]


async def _profiled(system: str, step: str, jobs: int, profiler: Profiler) -> float:
    bench = load(system)
    await bench.clear()
    if step in ("single", "bulk"):
        profiler.start()
        elapsed = await bench.enqueue(jobs, step == "bulk", 0.0)
        profiler.stop()
        return elapsed
    if step == "drain":
        await bench.enqueue(jobs, True, 0.0)
    tally = Tally(jobs, asyncio.get_running_loop())
    producer: list[subprocess.Popen[bytes]] = []
    marks: list[float] = []

    def ready() -> None:
        marks.append(time.perf_counter())
        profiler.start()
        if step == "latency":
            command = [sys.executable, "-m", "bench.child", system, "single", str(jobs), "10"]
            producer.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))

    await bench.work(tally, ready)
    profiler.stop()
    for process in producer:
        process.wait()
    if step == "latency":
        ordered = sorted(tally.latencies_ms)
        print(f"latency p50 {ordered[len(ordered) // 2]:.2f} ms", file=sys.stderr)
    return time.perf_counter() - marks[0]


def main(argv: list[str] | None = None) -> None:
    """Profile and print the report."""
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("system")
    parser.add_argument("step", choices=["drain", "single", "bulk", "latency"])
    parser.add_argument("jobs", type=int)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    profiler = Profiler(interval=0.0005, async_mode="disabled")
    elapsed = asyncio.run(_profiled(args.system, args.step, args.jobs, profiler))
    print(
        f"{args.system} {args.step} {args.jobs}: {args.jobs / elapsed:,.0f} jobs/s", file=sys.stderr
    )
    text = profiler.output_text(unicode=True, color=False, show_all=False)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
