"""queuey: typed background jobs and topics for asyncio, on PostgreSQL, RabbitMQ or in memory.

The public names are re-exported here; the PostgreSQL and RabbitMQ backends are imported from
``queuey.backends.postgres`` and ``queuey.backends.rabbitmq``, the synchronous producer from
``queuey.sync``.
"""

from queuey.backends.base import Backend, CancelResult, Consumer, Delivery, JobInfo
from queuey.backends.memory import MemoryBackend
from queuey.durations import Duration, parse_delay, parse_duration
from queuey.envelope import Envelope, MalformedEnvelopeError
from queuey.errors import (
    BackendError,
    BackendUnavailableError,
    ConfigError,
    Defer,
    DuplicateHandlerError,
    Fatal,
    HandlerSignal,
    NotSupportedError,
    PayloadError,
    QueueyError,
    Retry,
    SchemaError,
    ShutDownError,
    UnknownQueueError,
)
from queuey.jobs import Job, JobContext
from queuey.producer import Producer
from queuey.queues import DEFAULT_MAX_PRIORITY, Queue, QueueConfig, QueueSet
from queuey.retry import Backoff, RetryPolicy
from queuey.schedule import Schedule
from queuey.unique import EnqueueResult, Unique
from queuey.worker import QueueStats, Worker

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendError",
    "BackendUnavailableError",
    "Backoff",
    "CancelResult",
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
    "JobInfo",
    "MalformedEnvelopeError",
    "MemoryBackend",
    "NotSupportedError",
    "PayloadError",
    "Producer",
    "Queue",
    "QueueConfig",
    "QueueSet",
    "QueueStats",
    "QueueyError",
    "Retry",
    "RetryPolicy",
    "Schedule",
    "SchemaError",
    "ShutDownError",
    "Unique",
    "UnknownQueueError",
    "Worker",
    "parse_delay",
    "parse_duration",
]
