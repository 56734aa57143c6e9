"""Profile one system's step with pyinstrument:
``python -m bench.profile SYSTEM {drain,single,bulk,latency} N [--out FILE]``.

``drain`` pre-enqueues N jobs (not profiled) and profiles the worker draining them; ``latency``
profiles an idle worker fed one job every 10 ms by a producer in another process. The text
report (slowest paths first) goes to stdout or ``--out``. ``--by-package`` prints instead the
sampled time by the package whose code was running (queuey, aio_pika, aiormq, pamqp, asyncio,
…), in µs per job: where a drain's time goes, library by library.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

from pyinstrument import Profiler
from pyinstrument.frame import Frame

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


def _package(frame: Frame, caller: str) -> str:
    """The top-level package (or standard-library module) of the code ``frame`` ran; a
    built-in function counts for the package that called it (``caller``)."""
    path = (frame.file_path or "").replace("\\", "/")
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/src/queuey/" in path:
        return "queuey"
    if "/bench/" in path:
        return "bench"
    if "/lib/python3" in path:
        return path.rsplit("/lib/python3", 1)[1].split("/")[1].removesuffix(".py")
    return caller if not path or path.startswith("<") else path


def by_package(root: Frame | None, jobs: int) -> str:
    """Self time summed per package, most first, as µs per job and share of the whole."""
    totals: dict[str, float] = {}
    stack = [(root, "?")] if root is not None else []
    while stack:
        frame, caller = stack.pop()
        if frame.is_synthetic:  # a "[self]" child's time is its parent's total_self_time
            continue
        name = _package(frame, caller)
        totals[name] = totals.get(name, 0.0) + frame.total_self_time
        stack.extend((child, name) for child in frame.children)
    whole = sum(totals.values()) or 1.0
    lines = [f"{'package':<22}{'µs/job':>10}{'share':>9}"]
    for name, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        lines.append(f"{name:<22}{seconds / jobs * 1e6:>10.1f}{seconds / whole:>9.1%}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Profile and print the report."""
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("system")
    parser.add_argument("step", choices=["drain", "single", "bulk", "latency"])
    parser.add_argument("jobs", type=int)
    parser.add_argument("--out")
    parser.add_argument("--by-package", action="store_true", help="time per package, µs/job")
    args = parser.parse_args(argv)
    profiler = Profiler(interval=0.0005, async_mode="disabled")
    elapsed = asyncio.run(_profiled(args.system, args.step, args.jobs, profiler))
    print(
        f"{args.system} {args.step} {args.jobs}: {args.jobs / elapsed:,.0f} jobs/s", file=sys.stderr
    )
    if args.by_package:
        text = by_package(
            profiler.last_session.root_frame() if profiler.last_session else None, args.jobs
        )
    else:
        text = profiler.output_text(unicode=True, color=False, show_all=False)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
