"""Interleaved A/B of two source trees on the PostgreSQL drain, read as the worker's CPU per job:
``python -m bench.cpu_ab SRC_A SRC_B [--modes off,noctx,tracing,unsampled] [--jobs N]
[--repetitions R] [--profile]``.

``SRC_A`` and ``SRC_B`` are ``src`` directories of two checkouts (e.g. ``git worktree add
/tmp/a main`` for A). For each repetition, for each mode, A then B each drain ``JOBS`` no-op jobs
in a fresh process (``PYTHONPATH=SRC``), in a schema of their own. Each drain reports its rate
and the worker process's CPU time over the jobs it drained (``time.process_time``, every thread
of the process, enqueueing excluded). The medians per mode and side follow, with B/A. On a
shared, loaded machine the CPU per job is the figure to compare: the rate moves with whatever
else runs. Modes: ``off``, ``noctx`` (the handler takes only the job), and the tracing modes of
``bench.systems._queuey.observability`` (``tracing``, ``unsampled``, ``metrics``, ...).

``--profile`` runs each drain under ``cProfile`` with a CPU clock instead, and prints the CPU
time per job summed by package (queuey, asyncio, psycopg, ...). cProfile's own cost is included
on both sides, so only the difference between A and B means something.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _package(path: str) -> str:
    path = path.replace("\\", "/")
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/queuey/" in path:
        return "queuey"
    if "/bench/" in path:
        return "bench"
    if "/lib/python3" in path:
        return path.rsplit("/lib/python3", 1)[1].split("/")[1].removesuffix(".py")
    return "builtin"


def _by_package(profile: cProfile.Profile, jobs: int) -> str:
    totals: dict[str, float] = {}
    for (path, _, _), row in pstats.Stats(profile).stats.items():  # type: ignore[attr-defined]
        callers = row[4]
        if path == "~":  # a built-in function counts for the package that called it
            packages = {_package(caller[0]) for caller in callers} or {"builtin"}
            key = "queuey" if "queuey" in packages else sorted(packages)[0]
        else:
            key = _package(path)
        totals[key] = totals.get(key, 0.0) + row[2]
    ranked = sorted(totals.items(), key=lambda item: -item[1])
    parts = [f"{name}={seconds / jobs * 1e6:.1f}" for name, seconds in ranked[:6]]
    return " ".join([*parts, f"total={sum(totals.values()) / jobs * 1e6:.1f}"])


async def _drain(mode: str, jobs: int, profile: bool) -> str:
    """One drain in this process: ``"<jobs/s> <cpu µs/job>"`` or the profile's line."""
    from bench.systems import _queuey
    from bench.systems._env import DATABASE_URL, drop_schema
    from queuey import JobContext, Producer, Worker
    from queuey.backends.postgres import PostgresBackend, migrate

    schema = f"bench_ab_{os.getpid()}"
    await migrate(DATABASE_URL, schema=schema)
    _queuey.OBSERVE = "" if mode in ("off", "noctx") else mode
    tracing, metrics = _queuey.observability()
    profiler = cProfile.Profile(time.process_time)
    try:
        async with PostgresBackend(DATABASE_URL, schema=schema, retain=None) as backend:
            producer = await Producer.create(_queuey.BenchQueues, backend, tracing=tracing)
            for start in range(0, jobs, 5000):
                batch = [_queuey.Noop(t=0.0) for _ in range(min(5000, jobs - start))]
                await producer.enqueue_many(batch)
            worker = Worker(_queuey.BenchQueues, backend, tracing=tracing, metrics=metrics)
            done = asyncio.Event()
            seen = [0]

            def count() -> None:
                seen[0] += 1
                if seen[0] == jobs:
                    done.set()

            async def with_context(job: _queuey.Noop, ctx: JobContext) -> None:
                count()

            async def job_only(job: _queuey.Noop) -> None:
                count()

            worker.handler(_queuey.Noop)(job_only if mode == "noctx" else with_context)
            cpu, wall = time.process_time(), time.perf_counter()
            if profile:
                profiler.enable()
            running = asyncio.create_task(worker.run())
            await done.wait()
            profiler.disable()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            worker.shutdown()
            await running
    finally:
        await drop_schema(schema)
    if profile:
        return _by_package(profiler, jobs)
    return f"{jobs / wall:.0f} {cpu / jobs * 1e6:.1f}"


def _one(source: str, mode: str, jobs: int, profile: bool) -> str:
    command = [sys.executable, "-m", "bench.cpu_ab", "--child", mode, str(jobs)]
    if profile:
        command.append("--profile")
    env = {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{ROOT}"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu_ab")
    parser.add_argument("sources", nargs="*")
    parser.add_argument("--modes", default="off")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "JOBS"))
    args = parser.parse_args()
    if args.child:
        print(asyncio.run(_drain(args.child[0], int(args.child[1]), args.profile)))
        return
    if len(args.sources) != 2:
        parser.error("give two source directories, A then B")
    modes = args.modes.split(",")
    rows: dict[tuple[str, str], list[str]] = {}
    print(f"start {time.strftime('%H:%M', time.gmtime())} load {os.getloadavg()[0]:.2f}")
    for _ in range(args.repetitions):
        for mode in modes:
            for side, source in zip("AB", args.sources, strict=True):
                line = _one(source, mode, args.jobs, args.profile)
                rows.setdefault((mode, side), []).append(line)
                print(f"{mode} {side} {line}", flush=True)
    print(f"end {time.strftime('%H:%M', time.gmtime())} load {os.getloadavg()[0]:.2f}")
    if args.profile:
        return
    for mode in modes:
        medians = {}
        for side in "AB":
            rates = [float(line.split()[0]) for line in rows[mode, side]]
            cpus = [float(line.split()[1]) for line in rows[mode, side]]
            medians[side] = statistics.median(rates), statistics.median(cpus)
            print(
                f"{mode} {side}: {medians[side][0]:,.0f} jobs/s, {medians[side][1]:.1f} µs CPU/job"
            )
        (rate_a, cpu_a), (rate_b, cpu_b) = medians["A"], medians["B"]
        print(f"{mode} B/A: rate {rate_b / rate_a:.3f}, CPU per job {cpu_b / cpu_a:.3f}")


if __name__ == "__main__":
    main()
