"""``Subscriber``: runs an app's functions on the messages of its subscribed topics.

A thin assembler: the topic face (``topics._face``) on the engine shared with the
typed-job ``Worker`` (``_runtime.engine``): one consumer per topic (``batch`` messages at a
time), ``concurrency`` messages handled at once, the same middleware chain. Each message names
its function (the subscriber); success acks it, a failure retries it after
``retry_delay_secs(attempts)`` until ``max_attempts``, then leaves it failed with the error. A
message whose function is not loaded fails the same way, with a reason saying so; such
subscriptions are also reported (ERROR) at start-up. ``enabled = false`` starts it paused:
nothing is handled, publishing still records, and ``resume`` picks everything up.

The ``[queues.schedule]`` topics are published while it runs, each slot with the idempotency
key (schedule, slot), so every process of the app may run them: each slot is published once.

Waking on NOTIFY, polling every ``poll_secs``, lease reclaim and the retention sweep are the
backend's (``PostgresBackend`` is built with ``poll_secs``, ``lease_secs`` and ``retain_hours``).
Each outcome is logged on ``queuey.topics`` with ``topic``, ``subscriber``, ``message_id`` and
``attempts`` as structured fields.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime

from queuey._runtime.engine import Engine
from queuey._runtime.middleware import Middleware
from queuey._runtime.scheduler import Entry, Fire, Scheduler, running, schedule_backend
from queuey.backends.base import Backend
from queuey.durations import Duration, parse_duration
from queuey.queues import QueueConfig
from queuey.schedule import slot_key
from queuey.topics._decision import not_loaded
from queuey.topics._face import TopicFace
from queuey.topics.config import QueuesConfig
from queuey.topics.function import Function
from queuey.topics.publisher import TopicPublisher
from queuey.topics.schedule import TopicSchedule
from queuey.unique import EnqueueResult

__all__ = ["Subscriber", "topic_entries", "topic_queue"]

log = logging.getLogger("queuey.topics")


def topic_queue(topic: str, config: QueuesConfig) -> QueueConfig:
    """The queue a topic is consumed as: ``kind="topic"``, ``prefetch=batch``, no priorities,
    the ``[queues.limits]`` of its subscribers, and only the subscribers this app declares for
    it: another app sharing the table (or an
    older deploy) leaves rows for subscribers it does not know to the processes that do."""
    return QueueConfig(
        name=topic,
        kind="topic",
        prefetch=config.batch,
        max_priority=0,
        job_types=tuple(config.subscribers(topic)),
        app=config.prefix,
        limits=tuple(
            spec for name in config.subscribers(topic) for spec in config.subscriber_limits(name)
        ),
    )


def topic_entries(config: QueuesConfig, backend: Backend) -> list[Entry]:
    """The entries that publish ``config``'s ``[queues.schedule]`` topics on ``backend``.

    Raises:
        ConfigError: there are schedules and ``backend`` cannot keep them (RabbitMQ).
    """
    if not config.schedule:
        return []
    schedule_backend(backend)
    publisher = TopicPublisher(config, backend)
    return [Entry(plan, _publisher(publisher, plan)) for plan in config.schedule.values()]


def _publisher(publisher: TopicPublisher, plan: TopicSchedule) -> Fire:
    async def fire(slot: datetime) -> EnqueueResult:
        key = slot_key(plan.name, slot)
        publication = await publisher.publish(plan.topic, plan.payload, key=key)
        return EnqueueResult(publication.id, not publication.replayed)

    return fire


class Subscriber(Engine):
    """Handles the messages of ``config``'s subscribed topics with ``functions``.

    Args:
        config: the app's ``[queues]`` settings.
        functions: the loaded functions by name (read when each message is handled, so a
            function registered later is found).
        backend: the transport.
        concurrency: messages handled at once, and threads for plain functions (default:
            ``batch``).
        shutdown_grace: how long shutdown waits for running functions before cancelling them
            (default: no limit). A cancelled message is redelivered later (at-least-once). A
            plain function cannot be cancelled: its message is not handed back while its
            thread runs (an ERROR says how many); it is recorded when the thread ends, or
            redelivered after the lease once the process has exited.
        paused: start paused (default: ``not config.enabled``).
        middleware: ``Middleware`` instances run around each message and told each outcome,
            after the built-in ones (outcome log, stats), in order.

    Attributes:
        stats: per topic, the outcomes this subscriber observed (``QueueStats``).
        dead_letters: the last 100 ``(envelope, reason)`` pairs this subscriber left failed.

    Raises:
        ConfigError: a ``concurrency`` that is not a whole number >= 1, a zero
            ``shutdown_grace``, a member of ``middleware`` that is not a ``Middleware``, or
            ``[queues.schedule]`` entries on a backend that cannot keep schedules.
    """

    def __init__(
        self,
        config: QueuesConfig,
        functions: Mapping[str, Function],
        backend: Backend,
        *,
        concurrency: int | None = None,
        shutdown_grace: Duration | None = None,
        paused: bool | None = None,
        middleware: Sequence[Middleware] = (),
    ) -> None:
        self.config = config
        self.functions = functions
        self.queues = [topic_queue(topic, config) for topic in config.topics()]
        self._schedule_entries = topic_entries(config, backend)
        super().__init__(
            backend,
            TopicFace(config, functions),
            self.queues,
            concurrency=config.batch if concurrency is None else concurrency,
            shutdown_grace=None
            if shutdown_grace is None
            else parse_duration(shutdown_grace, "shutdown_grace"),
            paused=not config.enabled if paused is None else paused,
            middleware=middleware,
            thread_name_prefix="queuey-topic",
        )

    def missing_functions(self) -> list[tuple[str, str]]:
        """``(topic, function)`` pairs whose function is not loaded, in declared order."""
        return [
            (topic, name)
            for topic in self.config.topics()
            for name in self.config.subscribers(topic)
            if name not in self.functions
        ]

    async def run(self) -> None:
        """Report the subscriptions, declare the topics, handle messages until ``shutdown``,
        then shut down gracefully (finish what was taken, await what runs).

        Raises:
            BackendError: declaring failed, or a consumer could not go on.
            RuntimeError: ``run`` is already running.
        """
        with self._exclusive("subscriber"):
            entries = self._schedule_entries
            scheduler = Scheduler(schedule_backend(self.backend), entries) if entries else None
            try:
                self._report()
                async with running(scheduler):
                    await self._consume()
            finally:
                log.info("topic subscriber stopped")

    def _report(self) -> None:
        for topic, name in self.missing_functions():
            log.error("%s", not_loaded(name, topic), extra={"topic": topic, "subscriber": name})
        topics = ", ".join(self.config.topics()) or "none"
        log.info("topic subscriber started: channel %s, topics %s", self.config.channel(), topics)
        if not self.config.subscribe:
            log.warning("no topic is subscribed ([queues.subscribe] is empty); nothing to handle")
        if self.paused:
            log.warning("message handling is paused; published messages are kept until resumed")
