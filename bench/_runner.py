"""Drives the child processes of one system through its repetitions and turns their timings into
``Run`` rows. A worker child's peak RSS is read from ``/proc/<pid>/status`` (``VmHWM``, the
kernel's high-water mark) after it reports its result and before it is let go.

Children that must start together (the 2 worker processes of ``drain_2p``; the worker and the
producer of ``enqueue_p99_during_drain``) each report ready once connected and wait for a line
on stdin; the harness sends it to all of them once all are ready."""

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

# A step's longest run: procrastinate drains 20,000 jobs beside 1,000,000 rows at ~30 jobs/s
# on a slow day (about 11 minutes).
_STEP_TIMEOUT_S = 1200.0
_RETRY_PAUSE_S = 5.0
T = TypeVar("T")
_WORKERLESS = {"sql-limit", "bare-loop"}
_RSS_FLATNESS = {"queuey-postgres", "queuey-rabbitmq"}
_TWO_PROCESSES = {"queuey-postgres", "queuey-rabbitmq", "pgqueuer", "dramatiq"}
_SCALED = {"queuey-postgres", "pgqueuer", "procrastinate"}
_DURING_DRAIN = {"queuey-postgres", "pgqueuer"}


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


class _Child:
    """A ``work`` or ``timed`` child: started, waited for until ready, told to go (when it
    waits for that), then read for its result."""

    def __init__(self, system: str, *args: object) -> None:
        self.what = f"{system} {' '.join(str(a) for a in args)}"
        self.errors = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            _command(system, *args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            text=True,
        )
        assert self.process.stdout is not None and self.process.stdin is not None
        self.stdout = self.process.stdout
        self.stdin = self.process.stdin

    def ready(self) -> None:
        try:
            _read_json(self.stdout, self.what)
        except RuntimeError:
            self._fail()

    def go(self) -> None:
        self.stdin.write("go\n")
        self.stdin.flush()

    def result(self) -> tuple[dict[str, Any], float]:
        """The child's result and its peak RSS in MB (0 for a ``timed`` child, which exits
        without waiting)."""
        try:
            document = _read_json(self.stdout, self.what)
        except RuntimeError:
            self._fail()
        rss = _peak_rss_mb(self.process.pid) if self.process.poll() is None else 0.0
        self.process.communicate(timeout=60)
        self.errors.close()
        return document, rss

    def _fail(self) -> NoReturn:
        self.process.kill()
        self.process.communicate()
        self.errors.seek(0)
        raise RuntimeError(f"{self.what}: {self.errors.read()[-3000:]}")

    def kill(self) -> None:
        """Stop the child if it still runs (after another child of the step failed)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        self.errors.close()


def _worker(system: str, jobs: int, latencies: bool = False, *options: str) -> _Child:
    return _Child(system, "work", jobs, int(latencies), *options)


def _drain(system: str, jobs: int) -> tuple[float, float]:
    _step(system, "bulk", jobs)
    worker = _worker(system, jobs)
    worker.ready()
    document, rss = worker.result()
    return jobs / float(document["seconds"]), rss


def _together(children: list[_Child]) -> list[dict[str, Any]]:
    """Wait until every child is ready, tell them all to go, and return their results."""
    try:
        for child in children:
            child.ready()
        for child in children:
            child.go()
        return [child.result()[0] for child in children]
    finally:
        for child in children:
            child.kill()


def _drain_processes(system: str, jobs: int, processes: int) -> float:
    """The drain by ``processes`` worker processes started together, timed from the first
    one's start to the last one's graceful stop; jobs/s."""
    _step(system, "bulk", jobs)
    with tempfile.NamedTemporaryFile(prefix="bench-count-") as counts:
        counts.write(bytes(8 * processes))
        counts.flush()
        documents = _together(
            [
                _worker(system, jobs, False, "go", f"shared={counts.name}:{index}:{processes}")
                for index in range(processes)
            ]
        )
    ended = max(float(d["ended_at"]) for d in documents)
    seconds = ended - min(float(d["started_at"]) for d in documents)
    if sum(int(d["mine"]) for d in documents) < jobs:
        raise RuntimeError(f"{system}: the {processes} processes ran fewer than {jobs} jobs")
    return jobs / seconds


def _drain_scaled(system: str, plan: Plan) -> float:
    """The drain beside ``plan.scaled_done`` done and ``plan.scaled_later`` later rows (the
    set-up untimed); jobs/s."""
    _step(system, "scaled", plan.drain_jobs, plan.scaled_done, plan.scaled_later)
    worker = _worker(system, plan.drain_jobs)
    worker.ready()
    document, _ = worker.result()
    _step(system, "scaled", 0, 0, 0)  # the next drains start on an empty, vacuumed table
    return plan.drain_jobs / float(document["seconds"])


def _enqueue_during_drain(system: str, plan: Plan) -> list[float]:
    """Each single enqueue's duration (ms, sorted) among those started while a worker drained
    ``plan.during_backlog`` jobs (until it had run as many jobs as the backlog held)."""
    backlog = plan.during_backlog
    _step(system, "bulk", backlog)
    expected = backlog + plan.during_calls + 1  # + the producer's warm-up enqueue
    worker = _worker(system, expected, False, "go", f"mark={backlog}")
    producer = _Child(system, "timed", plan.during_calls, plan.during_interval_ms)
    drained, timed = _together([worker, producer])
    until = drained["marked_at"] or drained["ended_at"]
    during = sorted(float(ms) for started, ms in timed["calls"] if started < until)
    _log(f"  {system}: {len(during)}/{plan.during_calls} enqueues ran during the drain")
    if len(during) < 2:
        raise RuntimeError(f"{system}: the drain ended before the enqueues began")
    return during


def _latency(system: str, plan: Plan) -> list[float]:
    worker = _worker(system, plan.latency_jobs, True)
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
    """One repetition of every measurement of ``system`` (those ``plan.only`` names)."""
    values: dict[str, float] = {}
    if plan.wants("enqueue_single"):
        values["enqueue_single"] = (
            plan.single_jobs / _step(system, "single", plan.single_jobs)["seconds"]
        )
    if plan.wants("enqueue_bulk"):
        values["enqueue_bulk"] = plan.bulk_jobs / _step(system, "bulk", plan.bulk_jobs)["seconds"]
    if plan.wants("drain") or plan.wants("rss_mb"):
        rate, rss = _drain(system, plan.drain_jobs)
        values["drain"] = rate
    if system in _WORKERLESS:
        return values
    if plan.wants("rss_mb") and "drain" in values:
        values["rss_mb"] = rss
    if any(plan.wants(f"latency_{p}") for p in ("p50", "p95", "p99")):
        latencies = _latency(system, plan)
        values.update(
            latency_p50=_percentile(latencies, 0.50),
            latency_p95=_percentile(latencies, 0.95),
            latency_p99=_percentile(latencies, 0.99),
        )
    if system in _TWO_PROCESSES and plan.wants("drain_2p"):
        values["drain_2p"] = _drain_processes(system, plan.drain_jobs, 2)
    if system in _SCALED and plan.wants("drain_scaled"):
        values["drain_scaled"] = _drain_scaled(system, plan)
    if system in _DURING_DRAIN and plan.wants("enqueue_p99_during_drain"):
        durations = _enqueue_during_drain(system, plan)
        values["enqueue_p99_during_drain"] = _percentile(durations, 0.99)
    return values


def _settings_for(
    system: str, measurement: str, plan: Plan, settings: dict[str, Any]
) -> dict[str, Any]:
    sizes: dict[str, dict[str, Any]] = {
        "drain": {"jobs": plan.drain_jobs, "worker_processes": 1},
        "drain_2p": {
            "jobs": plan.drain_jobs,
            "worker_processes": 2,
            "how": "2 worker processes started by the harness, told to go together",
        },
        "drain_scaled": {
            "jobs": plan.drain_jobs,
            "worker_processes": 1,
            "done_rows": plan.scaled_done,
            "later_rows": plan.scaled_later,
            "set_up": "untimed: the table emptied, one INSERT … SELECT generate_series per kind "
            "of row, VACUUM ANALYZE, then the jobs enqueued in bulk",
        },
        "enqueue_p99_during_drain": {
            "calls": plan.during_calls,
            "interval_ms": plan.during_interval_ms,
            "backlog": plan.during_backlog,
            "what": "single enqueue call durations started while one worker drained the backlog",
        },
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
        try:
            small = _retrying(system, lambda: _drain(system, plan.rss_small))[1]
            large = _retrying(system, lambda: _drain(system, plan.rss_large))[1]
        except Exception as exc:  # the other figures stand; the flatness is not measured
            _log(f"  {system}: RSS flatness not measured: {str(exc).strip().splitlines()[-1]}")
            return extra
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
