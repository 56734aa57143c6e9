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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import IO, Any, NoReturn, TypeVar

from bench._model import Plan, Run, summarise

__all__ = ["SystemResult", "measure"]

_STEP_TIMEOUT_S = 600.0
_RETRY_PAUSE_S = 5.0
T = TypeVar("T")
_WORKERLESS = {"sql-limit", "bare-loop"}
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


def measure(systems: list[str], plan: Plan) -> list[SystemResult]:
    """Every measurement of every system, ``plan.repetitions`` times. The repetitions are
    interleaved (the first of every system, then the second…), so that a change of load on a
    shared machine weighs on every system alike. Never raises: a system that fails is
    returned with ``SystemResult.error`` and the others go on."""
    results = {system: SystemResult(system) for system in systems}
    settings: dict[str, dict[str, Any]] = {}
    values: dict[str, dict[str, list[float]]] = {system: {} for system in systems}
    for system in systems:
        try:
            settings[system] = _retrying(system, partial(_step, system, "setup"))["settings"]
        except Exception as exc:
            _fail(results[system], exc)
    for rep in range(plan.repetitions):
        for system in [s for s in systems if results[s].error is None]:
            _log(f"  {system}: repetition {rep + 1}/{plan.repetitions}")
            try:
                figures = _retrying(system, partial(_repetition, system, plan))
            except Exception as exc:
                _fail(results[system], exc)
                continue
            for measurement, value in figures.items():
                values[system].setdefault(measurement, []).append(value)
    for system in systems:
        result = results[system]
        if result.error is None:
            try:
                result.runs = [
                    summarise(system, m, series, _settings_for(system, m, plan, settings[system]))
                    for m, series in values[system].items()
                ]
            except Exception as exc:
                _fail(result, exc)
        try:
            _retrying(system, partial(_step, system, "teardown"))
        except Exception as exc:  # the figures stand; the schema or queue is left behind
            _log(f"  {system}: teardown failed: {str(exc).strip().splitlines()[-1]}")
    return [results[system] for system in systems]


def _fail(result: SystemResult, exc: Exception) -> None:
    result.error = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
    _log(f"  {result.system}: FAILED: {exc}")


def _retrying(system: str, step: Callable[[], T]) -> T:
    """``step()``, tried once more after ``_RETRY_PAUSE_S`` if it fails: other people's test
    suites on this machine restart PostgreSQL and RabbitMQ now and then."""
    try:
        return step()
    except Exception as exc:
        _log(f"  {system}: {str(exc).strip().splitlines()[-1]}; retrying once")
        time.sleep(_RETRY_PAUSE_S)
        return step()


def _repetition(system: str, plan: Plan) -> dict[str, float]:
    """One repetition of every measurement of ``system``."""
    single = _step(system, "single", plan.single_jobs)["seconds"]
    bulk = _step(system, "bulk", plan.bulk_jobs)["seconds"]
    values = {"enqueue_single": plan.single_jobs / single, "enqueue_bulk": plan.bulk_jobs / bulk}
    rate, rss = _drain(system, plan.drain_jobs)
    values["drain"] = rate
    if system in _WORKERLESS:
        return values
    latencies = _latency(system, plan)
    values.update(
        rss_mb=rss,
        latency_p50=_percentile(latencies, 0.50),
        latency_p95=_percentile(latencies, 0.95),
        latency_p99=_percentile(latencies, 0.99),
    )
    return values


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
        small = _retrying(system, lambda: _drain(system, plan.rss_small))[1]
        large = _retrying(system, lambda: _drain(system, plan.rss_large))[1]
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
