"""Prometheus metrics (the ``metrics`` extra: ``prometheus-client``).

Imported only when metrics are asked for (``Worker(..., metrics=Metrics())``, ``queuey worker
--http-port``), so without them no run pays for them: the ``Measure`` middleware is simply not
in the chain. Every series is created once per queue and outcome and cached, so a run costs a
few dictionary lookups and counter increments.

Names follow Prometheus conventions (``_total`` counters, ``_seconds`` units):

- ``queuey_jobs_total{queue,outcome}``: recorded outcomes (``succeeded``, ``retried``,
  ``deferred``, ``dead``, ``cancelled``, ``lease_lost``) and ``settle_failure`` (an outcome the
  backend could not record).
- ``queuey_workflow_steps_total{queue,outcome}``: the same outcomes, of workflow steps only
  (a run whose envelope has the ``queuey-workflow`` header). No label names the workflow: a
  workflow id per series would grow without bound; trace a workflow by its id instead.
- ``queuey_job_duration_seconds{queue}``: how long a run took (histogram).
- ``queuey_job_lag_seconds{queue}``: from when a job was due to when it was handed to the
  worker (histogram; PostgreSQL and memory, which know the due time).
- ``queuey_jobs_in_flight{queue}``: runs going on now (gauge).
- ``queuey_queue_depth{queue,state}`` (``pending``, ``scheduled``, ``running``, ``failed``) and
  ``queuey_queue_oldest_pending_age_seconds{queue}``: read from the backend every
  ``depth_interval`` by one query for all queues (``DepthSampler``), never per scrape.
- ``queuey_jobs_throttled_total{queue,limit}`` (``limit``: ``concurrency`` or ``rate``): claims
  of a queue with flow limits that held at least one due job back; and
  ``queuey_jobs_held_back{queue,limit}``: the due jobs the latest claim held back (at most the
  rows one claim considers). Counted by the claims themselves (no extra query), carried over
  every ``depth_interval`` with the depths (PostgreSQL, memory).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from queuey._extras import install_hint
from queuey._outcome import Outcome, OutcomeKind
from queuey._runtime.middleware import CallNext, Middleware
from queuey._validation import check_float
from queuey.backends.base import Delivery, DepthBackend, QueueDepth
from queuey.backends.steps import WORKFLOW_HEADER
from queuey.errors import BackendError, ConfigError
from queuey.limits import ThrottleBackend, Throttled

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ConfigError(f"metrics need prometheus-client: {install_hint('metrics')} ({exc})") from exc

__all__ = ["DEPTH_STATES", "DepthSampler", "Measure", "Metrics"]

log = logging.getLogger("queuey.metrics")

DEPTH_STATES = ("pending", "scheduled", "running", "failed")
"""The ``state`` label values of ``queuey_queue_depth``."""

SETTLE_FAILURE = "settle_failure"
"""The ``outcome`` label of an outcome the backend could not record."""

_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


class Metrics:
    """The Prometheus series of one process, in ``registry``.

    Give the same ``Metrics`` to every worker and subscriber of a process; serve
    ``registry`` with ``queuey.observability.HealthServer`` (``/metrics``) or any
    ``prometheus_client`` exposition.

    Args:
        registry: where the series are registered (default: a new ``CollectorRegistry``;
            pass ``prometheus_client.REGISTRY`` to add them to the process's default one).
        depth_interval: how often the queue depth is read from the backend (seconds, > 0;
            default 15).

    Raises:
        ConfigError: ``depth_interval`` is not a positive number of seconds.
        ValueError: ``registry`` already holds queuey's series (one ``Metrics`` per registry).
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, depth_interval: float = 15.0
    ) -> None:
        self.registry = CollectorRegistry() if registry is None else registry
        self.depth_interval = check_float(depth_interval, "depth_interval", positive=True)
        where = self.registry
        self.jobs = Counter(
            "queuey_jobs",
            "Outcomes recorded, per queue and outcome.",
            ["queue", "outcome"],
            registry=where,
        )
        self.duration = Histogram(
            "queuey_job_duration_seconds",
            "How long a run took.",
            ["queue"],
            buckets=_DURATION_BUCKETS,
            registry=where,
        )
        self.lag = Histogram(
            "queuey_job_lag_seconds",
            "From when a job was due to when it started.",
            ["queue"],
            buckets=_LAG_BUCKETS,
            registry=where,
        )
        self.in_flight = Gauge(
            "queuey_jobs_in_flight", "Runs going on now.", ["queue"], registry=where
        )
        self.depth = Gauge(
            "queuey_queue_depth",
            "Messages per queue and state, read from the backend.",
            ["queue", "state"],
            registry=where,
        )
        self.oldest = Gauge(
            "queuey_queue_oldest_pending_age_seconds",
            "How long the oldest due message of a queue has waited.",
            ["queue"],
            registry=where,
        )

        self.throttled = Counter(
            "queuey_jobs_throttled",
            "Claims that flow limits made hold due jobs back, per queue and limit kind.",
            ["queue", "limit"],
            registry=where,
        )
        self.held_back = Gauge(
            "queuey_jobs_held_back",
            "Due jobs the latest claim held back under flow limits, per queue and limit kind.",
            ["queue", "limit"],
            registry=where,
        )
        self.steps = Counter(
            "queuey_workflow_steps",
            "Outcomes recorded for workflow steps, per queue and outcome.",
            ["queue", "outcome"],
            registry=where,
        )
        self._throttled_seen: dict[tuple[str, str], int] = {}

    def record_throttled(self, throttled: Sequence[Throttled]) -> None:
        """Carry a backend's running totals (``ThrottleBackend.throttled``) into the throttle
        series: the counter grows by what is new since the last call."""
        for item in throttled:
            key = (item.queue, item.limit)
            new = item.claims - self._throttled_seen.get(key, 0)
            self._throttled_seen[key] = item.claims
            self.throttled.labels(*key).inc(max(new, 0))
            self.held_back.labels(*key).set(item.held)

    def record_depths(self, depths: Sequence[QueueDepth]) -> None:
        """Set the depth gauges to ``depths`` (kinds sharing a name are summed); a queue
        that has emptied reads 0."""
        totals: dict[str, list[float]] = {}
        oldest: dict[str, float] = {}
        for depth in depths:
            row = totals.setdefault(depth.queue, [0.0] * len(DEPTH_STATES))
            for i, count in enumerate(
                (depth.pending, depth.scheduled, depth.running, depth.failed)
            ):
                row[i] += count
            if depth.oldest_pending_secs is not None:
                oldest[depth.queue] = max(oldest.get(depth.queue, 0.0), depth.oldest_pending_secs)
        for labels in _seen(self.depth):
            totals.setdefault(labels[0], [0.0] * len(DEPTH_STATES))
        for queue, row in totals.items():
            for state, value in zip(DEPTH_STATES, row, strict=True):
                self.depth.labels(queue, state).set(value)
            self.oldest.labels(queue).set(oldest.get(queue, 0.0))


def _seen(gauge: Gauge) -> list[Sequence[str]]:
    """The label values ``gauge`` has a series for."""
    return list(gauge._metrics)  # prometheus_client keeps its children by label values


class _QueueSeries:
    """One queue's children of every per-queue series, made once."""

    __slots__ = ("duration", "in_flight", "lag", "outcomes")

    def __init__(self, metrics: Metrics, queue: str) -> None:
        self.duration = metrics.duration.labels(queue)
        self.lag = metrics.lag.labels(queue)
        self.in_flight = metrics.in_flight.labels(queue)
        kinds = [kind.value for kind in OutcomeKind] + [SETTLE_FAILURE]
        self.outcomes = {kind: metrics.jobs.labels(queue, kind) for kind in kinds}


class Measure(Middleware):
    """The middleware feeding ``metrics``: times each run, counts each outcome."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._series: dict[str, _QueueSeries] = {}

    def _of(self, queue: str) -> _QueueSeries:
        series = self._series.get(queue)
        if series is None:
            series = self._series[queue] = _QueueSeries(self._metrics, queue)
        return series

    async def around_call(self, delivery: Delivery, call_next: CallNext) -> Outcome:
        """Observe the lag, hold an in-flight slot and time the run."""
        series = self._of(delivery.envelope.queue)
        waited = getattr(delivery, "waited", None)
        if waited is not None:
            series.lag.observe(waited)
        series.in_flight.inc()
        started = time.perf_counter()
        try:
            return await call_next(delivery)
        finally:
            series.duration.observe(time.perf_counter() - started)
            series.in_flight.dec()

    def on_outcome(self, delivery: Delivery, outcome: Outcome) -> None:
        """Count ``outcome`` (a workflow step's also in the workflow steps' series)."""
        envelope = delivery.envelope
        self._of(envelope.queue).outcomes[outcome.kind.value].inc()
        if WORKFLOW_HEADER in envelope.headers:
            self._metrics.steps.labels(envelope.queue, outcome.kind.value).inc()

    def on_settle_failure(self, delivery: Delivery, outcome: Outcome, error: Exception) -> None:
        """Count a settle failure."""
        self._of(delivery.envelope.queue).outcomes[SETTLE_FAILURE].inc()


class DepthSampler:
    """Reads every queue's depth from ``backend`` into ``metrics`` every
    ``metrics.depth_interval`` (one query for all queues), with what its claims held back under
    flow limits (counted in memory), while ``run`` runs.

    A backend that cannot count its queues at once (RabbitMQ: read its own
    ``rabbitmq_prometheus`` metrics instead) leaves the gauges unset. A failed read is logged
    at DEBUG (the backend reports its outage itself) and tried again next time.
    """

    def __init__(self, backend: object, metrics: Metrics) -> None:
        self._backend = backend if isinstance(backend, DepthBackend) else None
        self._throttle = backend if isinstance(backend, ThrottleBackend) else None
        self._metrics = metrics

    async def sample(self) -> None:
        """Read the depths once. Never raises ``BackendError``."""
        if self._throttle is not None:
            self._metrics.record_throttled(self._throttle.throttled())
        if self._backend is None:
            return
        try:
            depths = await self._backend.queue_depths()
        except BackendError as exc:
            log.debug("could not read the queue depths: %s", exc)
            return
        self._metrics.record_depths(depths)

    async def run(self) -> None:
        """Sample until cancelled."""
        if self._backend is None:
            return
        while True:
            await self.sample()
            await asyncio.sleep(self._metrics.depth_interval)
