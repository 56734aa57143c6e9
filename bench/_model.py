"""The figures the harness records: one ``Run`` per (system, measurement), with the median, min
and max over the repetitions, and the sizes of one run (``Plan``)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["MEASUREMENTS", "SYSTEMS", "UNITS", "Plan", "Run", "summarise"]

SYSTEMS = (
    "queuey-postgres",
    "queuey-postgres-batch",
    "queuey-rabbitmq",
    "pgqueuer",
    "procrastinate",
    "dramatiq",
    "aio-pika",
    "sql-limit",
    "bare-loop",
)
MEASUREMENTS = (
    "drain",
    "drain_2p",
    "drain_scaled",
    "enqueue_single",
    "enqueue_bulk",
    "latency_p50",
    "latency_p95",
    "latency_p99",
    "rss_mb",
    "enqueue_p99_during_drain",
)
UNITS = {
    "drain": "jobs/s",
    "drain_2p": "jobs/s",
    "drain_scaled": "jobs/s",
    "enqueue_single": "jobs/s",
    "enqueue_bulk": "jobs/s",
    "latency_p50": "ms",
    "latency_p95": "ms",
    "latency_p99": "ms",
    "rss_mb": "MB",
    "enqueue_p99_during_drain": "ms",
}


@dataclass(frozen=True)
class Plan:
    """Sizes of one harness run.

    Attributes:
        repetitions: how often each measurement is repeated (the median is reported).
        drain_jobs: jobs pre-enqueued and drained by one worker process.
        single_jobs: jobs enqueued one at a time, each awaited.
        bulk_jobs: jobs enqueued in one ``enqueue_many`` call.
        latency_jobs: jobs enqueued one every ``latency_interval_ms`` to an idle worker.
        latency_interval_ms: milliseconds between two enqueues of the latency run.
        rss_small: drained jobs of the smaller RSS run (flatness check, queuey only).
        rss_large: drained jobs of the larger RSS run.
        scaled_done: rows of jobs already run beside the pending ones (``drain_scaled``).
        scaled_later: rows of jobs scheduled an hour ahead beside them (``drain_scaled``).
        during_calls: single enqueues timed while a drain runs (``enqueue_p99_during_drain``).
        during_interval_ms: milliseconds between two of those enqueues.
        during_backlog: jobs pre-enqueued for that drain (it should outlast the enqueues).
        only: the measurements to take (``enqueue_single``, ``enqueue_bulk``, ``drain``, ...);
            empty: every one.
    """

    repetitions: int = 3
    drain_jobs: int = 20_000
    single_jobs: int = 2_000
    bulk_jobs: int = 20_000
    latency_jobs: int = 1_000
    latency_interval_ms: float = 10.0
    rss_small: int = 10_000
    rss_large: int = 100_000
    scaled_done: int = 1_000_000
    scaled_later: int = 100_000
    during_calls: int = 500
    during_interval_ms: float = 5.0
    during_backlog: int = 50_000
    only: tuple[str, ...] = ()

    def wants(self, measurement: str) -> bool:
        """Whether this run takes ``measurement``."""
        return not self.only or measurement in self.only


QUICK = Plan(
    repetitions=1,
    drain_jobs=3_000,
    single_jobs=300,
    bulk_jobs=3_000,
    latency_jobs=200,
    rss_small=2_000,
    rss_large=10_000,
    scaled_done=100_000,
    scaled_later=10_000,
    during_calls=100,
    during_backlog=8_000,
)


@dataclass
class Run:
    """One row of ``bench/results/latest.json``."""

    system: str
    measurement: str
    unit: str
    median: float
    min: float
    max: float
    settings: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The row as the issue's JSON shape."""
        return asdict(self)


def summarise(system: str, measurement: str, values: list[float], settings: dict[str, Any]) -> Run:
    """The median, min and max of ``values`` (one per repetition), rounded for reading.

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError(f"{system} {measurement}: no value")
    digits = 2 if UNITS[measurement] in ("ms", "MB") else 0
    return Run(
        system=system,
        measurement=measurement,
        unit=UNITS[measurement],
        median=round(statistics.median(values), digits),
        min=round(min(values), digits),
        max=round(max(values), digits),
        settings=dict(settings),
    )
