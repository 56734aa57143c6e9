"""Drives the child processes of one system through its repetitions and turns their timings into
``Run`` rows. A worker child's peak RSS is read from ``/proc/<pid>/status`` (``VmHWM``, the
kernel's high-water mark) after it reports its result and before it is let go."""

from __future__ import annotations

import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO, Any, NoReturn

from bench._model import Plan, Run, summarise

__all__ = ["SystemResult", "measure"]

_STEP_TIMEOUT_S = 600.0
_WORKERLESS = {"sql-limit"}
_RSS_FLATNESS = {"queuey-postgres", "queuey-rabbitmq"}


@dataclass
class SystemResult:
    """What one system produced: its rows, or the error that stopped it."""

    system: str
    runs: list[Run] = field(default_factory=list)
    error: str | None = None


def _command(system: str, *args: object) -> list[str]:
    return [sys.executable, "-m", "bench.child", system, *(str(a) for a in args)]


def _read_json(stream: IO[str], what: str) -> dict[str, Any]:
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + _STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        if selector.select(timeout=1.0):
            line = stream.readline()
            if not line:
                raise RuntimeError(f"{what}: the child exited without a result")
            if line.startswith("{"):
                document: dict[str, Any] = json.loads(line)
                return document
    raise RuntimeError(f"{what}: no result within {_STEP_TIMEOUT_S:.0f}s")


def _step(system: str, *args: object) -> dict[str, Any]:
    done = subprocess.run(
        _command(system, *args), capture_output=True, text=True, timeout=_STEP_TIMEOUT_S
    )
    if done.returncode != 0:
        raise RuntimeError(f"{system} {args}: exit {done.returncode}\n{done.stderr[-3000:]}")
    line = [row for row in done.stdout.splitlines() if row.startswith("{")][-1]
    result: dict[str, Any] = json.loads(line)
    return result


def _peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmHWM for pid {pid}")


class _Worker:
    """A ``work`` child: started, waited for until ready, then read for its result."""

    def __init__(self, system: str, jobs: int, latencies: bool = False) -> None:
        self.what = f"{system} work {jobs}"
        self.errors = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            _command(system, "work", jobs, int(latencies)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            text=True,
        )
        assert self.process.stdout is not None
        self.stdout = self.process.stdout

    def ready(self) -> None:
        try:
            _read_json(self.stdout, self.what)
        except RuntimeError:
            self._fail()

    def result(self) -> tuple[dict[str, Any], float]:
        try:
            document = _read_json(self.stdout, self.what)
        except RuntimeError:
            self._fail()
        rss = _peak_rss_mb(self.process.pid)
        self.process.communicate(timeout=60)
        self.errors.close()
        return document, rss

    def _fail(self) -> NoReturn:
        self.process.kill()
        self.process.communicate()
        self.errors.seek(0)
        raise RuntimeError(f"{self.what}: {self.errors.read()[-3000:]}")


def _drain(system: str, jobs: int) -> tuple[float, float]:
    _step(system, "bulk", jobs)
    worker = _Worker(system, jobs)
    worker.ready()
    document, rss = worker.result()
    return jobs / float(document["seconds"]), rss


def _latency(system: str, plan: Plan) -> list[float]:
    worker = _Worker(system, plan.latency_jobs, latencies=True)
    worker.ready()
    _step(system, "single", plan.latency_jobs, plan.latency_interval_ms)
    document, _ = worker.result()
    return sorted(float(x) for x in document["latencies_ms"])


def _percentile(sorted_values: list[float], fraction: float) -> float:
    return statistics.quantiles(sorted_values, n=100, method="inclusive")[int(fraction * 100) - 1]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure(system: str, plan: Plan) -> SystemResult:
    """Run every measurement of ``system`` ``plan.repetitions`` times; never raises (a failure
    is returned as ``SystemResult.error``)."""
    result = SystemResult(system)
    try:
        settings = _step(system, "setup")["settings"]
        try:
            result.runs = _repeat(system, plan, settings)
        finally:
            _step(system, "teardown")
    except Exception as exc:
        result.error = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
        _log(f"  {system}: FAILED: {exc}")
    return result


def _repeat(system: str, plan: Plan, settings: dict[str, Any]) -> list[Run]:
    values: dict[str, list[float]] = {}

    def add(measurement: str, value: float) -> None:
        values.setdefault(measurement, []).append(value)

    for rep in range(plan.repetitions):
        _log(f"  {system}: repetition {rep + 1}/{plan.repetitions}")
        add(
            "enqueue_single",
            plan.single_jobs / _step(system, "single", plan.single_jobs)["seconds"],
        )
        add("enqueue_bulk", plan.bulk_jobs / _step(system, "bulk", plan.bulk_jobs)["seconds"])
        rate, rss = _drain(system, plan.drain_jobs)
        add("drain", rate)
        if system in _WORKERLESS:
            continue
        add("rss_mb", rss)
        latencies = _latency(system, plan)
        add("latency_p50", _percentile(latencies, 0.50))
        add("latency_p95", _percentile(latencies, 0.95))
        add("latency_p99", _percentile(latencies, 0.99))
    runs = []
    for measurement, series in values.items():
        extra = _settings_for(system, measurement, plan, settings)
        runs.append(summarise(system, measurement, series, extra))
    return runs


def _settings_for(
    system: str, measurement: str, plan: Plan, settings: dict[str, Any]
) -> dict[str, Any]:
    sizes: dict[str, dict[str, Any]] = {
        "drain": {"jobs": plan.drain_jobs, "worker_processes": 1},
        "enqueue_single": {"jobs": plan.single_jobs},
        "enqueue_bulk": {"jobs": plan.bulk_jobs, "calls": 1},
        "rss_mb": {"jobs": plan.drain_jobs, "what": "worker process VmHWM during the drain"},
    }
    size = sizes.get(
        measurement, {"jobs": plan.latency_jobs, "interval_ms": plan.latency_interval_ms}
    )
    extra = {**settings, **size, "repetitions": plan.repetitions}
    if measurement == "rss_mb" and system in _RSS_FLATNESS:
        _log(f"  {system}: RSS at {plan.rss_small} and {plan.rss_large} drained jobs")
        small = _drain(system, plan.rss_small)[1]
        large = _drain(system, plan.rss_large)[1]
        extra["peak_rss_mb_by_drained_jobs"] = {
            str(plan.rss_small): round(small, 2),
            str(plan.rss_large): round(large, 2),
        }
    return extra


def environment() -> dict[str, Any]:
    """Facts about this machine for the JSON's ``machine``."""
    import platform

    model = "?"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as meminfo:
        total_kb = int(meminfo.readline().split()[1])
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": round(total_kb / 1024 / 1024, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
    }
