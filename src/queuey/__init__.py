"""queuey: typed background jobs and topics for asyncio, on PostgreSQL, RabbitMQ or in memory.

The public names are re-exported here; the PostgreSQL and RabbitMQ backends are imported from
``queuey.backends.postgres`` and ``queuey.backends.rabbitmq``, the synchronous producer from
``queuey.sync``.

The names are imported on first use (``import queuey`` alone loads nothing else), so the
``queuey`` command starts fast; ``from queuey import Worker`` works as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from queuey.attempts import AttemptError
    from queuey.backends.base import (
        Backend,
        CancelResult,
        Consumer,
        Delivery,
        JobInfo,
    )
    from queuey.backends.memory import MemoryBackend
    from queuey.batching import BatchContext
    from queuey.durations import Duration, parse_delay, parse_duration
    from queuey.envelope import Envelope, MalformedEnvelopeError
    from queuey.errors import (
        BackendError,
        BackendUnavailableError,
        BatchEndedError,
        ConfigError,
        Defer,
        DuplicateHandlerError,
        Fatal,
        HandlerSignal,
        JobFailedError,
        NotSupportedError,
        PayloadError,
        QueueyError,
        ResultError,
        ResultTimeoutError,
        Retry,
        SchemaError,
        ShutDownError,
        UnknownBatchError,
        UnknownJobError,
        UnknownQueueError,
    )
    from queuey.jobs import Job, JobContext, NoResult
    from queuey.limits import Concurrency, RateLimit
    from queuey.producer import Producer
    from queuey.progress import Progress
    from queuey.queues import DEFAULT_MAX_PRIORITY, Queue, QueueConfig, QueueSet
    from queuey.results import JobHandle
    from queuey.retry import Backoff, RetryPolicy
    from queuey.schedule import Schedule
    from queuey.unique import EnqueueResult, Unique
    from queuey.worker import QueueStats, Worker

__version__ = "0.1.0"

_WHERE: dict[str, str] = {
    "AttemptError": "queuey.attempts",
    "Backend": "queuey.backends.base",
    "BackendError": "queuey.errors",
    "BackendUnavailableError": "queuey.errors",
    "Backoff": "queuey.retry",
    "BatchContext": "queuey.batching",
    "BatchEndedError": "queuey.errors",
    "CancelResult": "queuey.backends.base",
    "ConfigError": "queuey.errors",
    "Consumer": "queuey.backends.base",
    "DEFAULT_MAX_PRIORITY": "queuey.queues",
    "Defer": "queuey.errors",
    "Delivery": "queuey.backends.base",
    "DuplicateHandlerError": "queuey.errors",
    "Duration": "queuey.durations",
    "EnqueueResult": "queuey.unique",
    "Envelope": "queuey.envelope",
    "Fatal": "queuey.errors",
    "HandlerSignal": "queuey.errors",
    "Job": "queuey.jobs",
    "JobContext": "queuey.jobs",
    "JobFailedError": "queuey.errors",
    "JobHandle": "queuey.results",
    "JobInfo": "queuey.backends.base",
    "MalformedEnvelopeError": "queuey.envelope",
    "MemoryBackend": "queuey.backends.memory",
    "NoResult": "queuey.jobs",
    "NotSupportedError": "queuey.errors",
    "parse_delay": "queuey.durations",
    "parse_duration": "queuey.durations",
    "PayloadError": "queuey.errors",
    "Producer": "queuey.producer",
    "Progress": "queuey.progress",
    "Queue": "queuey.queues",
    "QueueConfig": "queuey.queues",
    "QueueSet": "queuey.queues",
    "QueueStats": "queuey.worker",
    "QueueyError": "queuey.errors",
    "ResultError": "queuey.errors",
    "ResultTimeoutError": "queuey.errors",
    "Retry": "queuey.errors",
    "RetryPolicy": "queuey.retry",
    "Schedule": "queuey.schedule",
    "SchemaError": "queuey.errors",
    "ShutDownError": "queuey.errors",
    "Unique": "queuey.unique",
    "Concurrency": "queuey.limits",
    "RateLimit": "queuey.limits",
    "UnknownBatchError": "queuey.errors",
    "UnknownJobError": "queuey.errors",
    "UnknownQueueError": "queuey.errors",
    "Worker": "queuey.worker",
}
"""Each public name and the module that defines it."""


__all__ = [
    "AttemptError",
    "Backend",
    "BackendError",
    "BackendUnavailableError",
    "Backoff",
    "BatchContext",
    "BatchEndedError",
    "CancelResult",
    "Concurrency",
    "ConfigError",
    "Consumer",
    "DEFAULT_MAX_PRIORITY",
    "Defer",
    "Delivery",
    "DuplicateHandlerError",
    "Duration",
    "EnqueueResult",
    "Envelope",
    "Fatal",
    "HandlerSignal",
    "Job",
    "JobContext",
    "JobFailedError",
    "JobHandle",
    "JobInfo",
    "MalformedEnvelopeError",
    "MemoryBackend",
    "NoResult",
    "NotSupportedError",
    "PayloadError",
    "Producer",
    "Progress",
    "Queue",
    "QueueConfig",
    "QueueSet",
    "QueueStats",
    "QueueyError",
    "RateLimit",
    "ResultError",
    "ResultTimeoutError",
    "Retry",
    "RetryPolicy",
    "Schedule",
    "SchemaError",
    "ShutDownError",
    "Unique",
    "UnknownBatchError",
    "UnknownJobError",
    "UnknownQueueError",
    "Worker",
    "parse_delay",
    "parse_duration",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use and keep it in the module's namespace."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'queuey' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
