"""``Subscriber``: runs an app's functions on the messages of its subscribed topics.

It runs on the worker's engine (``_runtime.loop``): one consumer per topic (``batch`` messages
at a time), one dispatch channel, ``concurrency`` messages handled at once. Each message names
its function (the subscriber); success acks it, a failure retries it after
``retry_delay_secs(attempts)`` until ``max_attempts``, then leaves it failed with the error. A
message whose function is not loaded fails the same way, with a reason saying so; such
subscriptions are also reported (ERROR) at start-up. ``enabled = false`` starts it paused:
nothing is handled, publishing still records, and ``resume`` picks everything up.

Waking on NOTIFY, polling every ``poll_secs``, lease reclaim and the retention sweep are the
backend's (``PostgresBackend`` is built with ``poll_secs``, ``lease_secs`` and ``retain_hours``).
Each outcome is logged on ``queuey.topics`` with ``topic``, ``subscriber``, ``message_id`` and
``attempts`` as structured fields.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from concurrent.futures import Executor
from typing import Any

from queuey._outcome import Ack, DeadLetter, Outcome, RetryAfter
from queuey._runtime.invoke import run_handler
from queuey._runtime.loop import ConsumeLoop
from queuey._runtime.settle import release, settle
from queuey.backends.base import Backend, Delivery
from queuey.durations import Duration, parse_duration
from queuey.envelope import Envelope
from queuey.errors import ConfigError
from queuey.queues import QueueConfig
from queuey.topics._decision import decide, error_text, not_loaded
from queuey.topics.config import QueuesConfig
from queuey.topics.function import Function, MessageContext
from queuey.topics.publisher import PUBLISHED_BY

__all__ = ["Subscriber", "topic_queue"]

log = logging.getLogger("queuey.topics")


def topic_queue(topic: str, config: QueuesConfig) -> QueueConfig:
    """The queue a topic is consumed as: ``kind="topic"``, ``prefetch=batch``, no priorities,
    and only the subscribers this app declares for it: another app sharing the table (or an
    older deploy) leaves rows for subscribers it does not know to the processes that do."""
    return QueueConfig(
        name=topic,
        kind="topic",
        prefetch=config.batch,
        max_priority=0,
        job_types=tuple(config.subscribers(topic)),
    )


class Subscriber:
    """Handles the messages of ``config``'s subscribed topics with ``functions``.

    Args:
        config: the app's ``[queues]`` settings.
        functions: the loaded functions by name (read when each message is handled, so a
            function registered later is found).
        backend: the transport.
        concurrency: messages handled at once, and threads for plain functions (default:
            ``batch``).
        shutdown_grace: how long shutdown waits for running functions before cancelling them
            (default: no limit). A cancelled message is redelivered later (at-least-once).
        paused: start paused (default: ``not config.enabled``).

    Raises:
        ConfigError: a non-positive ``concurrency`` or a zero ``shutdown_grace``.
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
    ) -> None:
        self.config = config
        self.functions = functions
        self.backend = backend
        self.concurrency = config.batch if concurrency is None else concurrency
        if isinstance(self.concurrency, bool) or self.concurrency < 1:
            raise ConfigError(f"concurrency: must be >= 1, got {self.concurrency}")
        grace = None if shutdown_grace is None else parse_duration(shutdown_grace, "shutdown_grace")
        self.queues = [topic_queue(topic, config) for topic in config.topics()]
        self.settle_failures = 0
        self._running = False
        self._loop = ConsumeLoop(
            backend,
            self.queues,
            self._process,
            concurrency=self.concurrency,
            shutdown_grace=grace,
            paused=not config.enabled if paused is None else paused,
            thread_name_prefix="queuey-topic",
        )

    @property
    def paused(self) -> bool:
        """Whether handling is paused."""
        return self._loop.paused

    @property
    def in_flight(self) -> int:
        """Messages being handled now."""
        return self._loop.in_flight

    def pause(self) -> None:
        """Stop taking messages (those already taken are finished); publishing still records.
        Idempotent; may be called before ``run``."""
        self._loop.pause()

    def resume(self) -> None:
        """Take messages again after ``pause``. Idempotent."""
        self._loop.resume()

    def shutdown(self, *, force: bool = False) -> None:
        """Ask ``run`` to stop gracefully (``force=True``: cancel running functions now and hand
        their messages back). Idempotent; may be called before ``run``."""
        self._loop.shutdown(force=force)

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
        if self._running:
            raise RuntimeError("this subscriber is already running")
        self._running = True
        try:
            self._report()
            await self.backend.declare(self.queues)
            await self._loop.run()
        finally:
            self._running = False
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

    async def _process(self, delivery: Delivery, queue: QueueConfig, executor: Executor) -> None:
        envelope = delivery.envelope
        try:
            error = await self._call(envelope, executor)
        except asyncio.CancelledError:  # shutdown grace passed: hand the message back
            await release(delivery)
            raise
        outcome = decide(envelope, error, self.config)
        fields = _fields(envelope)
        try:
            await settle(delivery, outcome)
        except Exception as exc:
            self.settle_failures += 1
            log.error("could not record the outcome: %s", exc, extra=fields)
            return
        _log_outcome(outcome, fields)

    async def _call(self, envelope: Envelope, executor: Executor) -> str | None:
        """Run the message's function; ``None`` on success, else the failure text."""
        function = self.functions.get(envelope.job_type)
        if function is None:
            return not_loaded(envelope.job_type, envelope.queue)
        context = _context(envelope)
        try:
            arguments = function.arguments(envelope.payload, context)
        except Exception as exc:
            return error_text(exc)
        error = await run_handler(
            function.call, arguments, is_async=function.is_async, executor=executor
        )
        return None if error is None else error_text(error)


def _context(envelope: Envelope) -> MessageContext:
    return MessageContext(
        topic=envelope.queue,
        message_id=envelope.job_id,
        subscriber=envelope.job_type,
        attempts=envelope.attempt,
        published_by=envelope.headers.get(PUBLISHED_BY, ""),
    )


def _fields(envelope: Envelope) -> dict[str, Any]:
    return {
        "topic": envelope.queue,
        "subscriber": envelope.job_type,
        "message_id": envelope.job_id,
        "attempts": envelope.attempt,
    }


def _log_outcome(outcome: Outcome, fields: dict[str, Any]) -> None:
    where = f"{fields['subscriber']} on {fields['topic']}"
    if isinstance(outcome, Ack):
        log.info("message handled by %s", where, extra=fields)
    elif isinstance(outcome, RetryAfter):
        log.warning(
            "message failed in %s; will retry in %.0fs: %s",
            where,
            outcome.delay.total_seconds(),
            outcome.error,
            extra=fields,
        )
    elif isinstance(outcome, DeadLetter):
        log.error(
            "message failed in %s for the last time (attempt %d); left failed: %s",
            where,
            fields["attempts"],
            outcome.reason,
            extra=fields,
        )
