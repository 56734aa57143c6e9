"""The topic face: functions looked up by name (the envelope's ``job_type``, read at each
message so a function registered later is found), called with the payload and a
``MessageContext``, retried on the ``[queues]`` backoff (``topics._decision``).

A message whose function is not loaded fails like a raising function, with a reason saying so.
Outcomes are logged on ``queuey.topics``; the message names the message, so any log format
shows which one (``message 6c1f…-… on order.paid for notify_ops (attempt 1) failed; will retry
in 10s: …``), and ``topic``, ``subscriber``, ``message_id`` and ``attempts`` are structured
fields too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Executor
from typing import Any

from queuey._outcome import (
    Ack,
    Cancelled,
    DeadLetter,
    DeferFor,
    LeaseLost,
    Outcome,
    RetryAfter,
)
from queuey._run_scope import current_run
from queuey._runtime.invoke import run_handler
from queuey.envelope import PUBLISHED_BY, Envelope
from queuey.queues import QueueConfig
from queuey.topics._decision import TopicRetry, decide, error_text, not_loaded
from queuey.topics.config import QueuesConfig
from queuey.topics.function import Function, MessageContext

__all__ = ["TopicFace", "message_context"]


def message_context(envelope: Envelope) -> MessageContext:
    """The ``MessageContext`` of a run of ``envelope``."""
    return MessageContext(
        topic=envelope.queue,
        message_id=envelope.job_id,
        subscriber=envelope.job_type,
        attempts=envelope.attempt,
        published_by=envelope.headers.get(PUBLISHED_BY, ""),
        run_scope=current_run(),
    )


class TopicFace:
    """Runs topic messages with ``functions`` under ``config``'s retry settings.

    Args:
        config: the app's ``[queues]`` settings (``max_attempts``, the backoff).
        functions: the loaded functions by name, read at each message.
    """

    log = logging.getLogger("queuey.topics")

    def __init__(self, config: QueuesConfig, functions: Mapping[str, Function]) -> None:
        self._retry = TopicRetry(config)
        self._functions = functions

    def on_loop(self, envelope: Envelope) -> bool:
        """Whether the message's function is a coroutine function (or is not loaded): its
        run never takes a thread."""
        function = self._functions.get(envelope.job_type)
        return function is None or function.is_async

    async def run(self, envelope: Envelope, queue: QueueConfig, executor: Executor) -> Outcome:
        """Call the message's function and decide (see ``Face.run``)."""
        failure = await self._call(envelope, executor)
        if isinstance(failure, BaseException):
            return decide(envelope, error_text(failure), self._retry, failure)
        return decide(envelope, failure, self._retry)

    def failed(self, envelope: Envelope, queue: QueueConfig, error: BaseException) -> Outcome:
        """``error`` decided like a function's failure."""
        return decide(envelope, error_text(error), self._retry, error)

    async def _call(self, envelope: Envelope, executor: Executor) -> BaseException | str | None:
        """Run the message's function; ``None`` on success, else what it raised (or why it
        could not run)."""
        function = self._functions.get(envelope.job_type)
        if function is None:
            return not_loaded(envelope.job_type, envelope.queue)
        try:
            arguments = function.arguments(envelope.payload, message_context(envelope))
        except Exception as exc:
            return exc
        return await run_handler(
            function.call, arguments, is_async=function.is_async, executor=executor
        )

    def fields(self, envelope: Envelope) -> dict[str, Any]:
        """``topic``, ``subscriber``, ``message_id`` and ``attempts``."""
        return {
            "topic": envelope.queue,
            "subscriber": envelope.job_type,
            "message_id": envelope.job_id,
            "attempts": envelope.attempt,
        }

    def outcome_message(
        self, envelope: Envelope, outcome: Outcome
    ) -> tuple[str, tuple[object, ...]]:
        """ "message ID on TOPIC for SUBSCRIBER (attempt N) handled", "… failed; will retry in
        10s: …", "… failed for the last time; left failed: …", "… cancelled while it ran; not
        retried" (a topic message is never deferred by its function)."""
        subject = "message %s on %s for %s (attempt %d) "
        who = (envelope.job_id, envelope.queue, envelope.job_type, envelope.attempt)
        match outcome:
            case Ack():
                return subject + "handled", who
            case RetryAfter(delay=delay, error=error):
                return subject + "failed; will retry in %.0fs: %s", (
                    *who,
                    delay.total_seconds(),
                    error,
                )
            case DeferFor(delay=delay, reason=reason):
                return subject + "deferred for %.0fs: %s", (*who, delay.total_seconds(), reason)
            case DeadLetter(reason=reason):
                return subject + "failed for the last time; left failed: %s", (*who, reason)
            case Cancelled():
                return subject + "cancelled while it ran; not retried", who
            case LeaseLost():
                return (
                    subject + "lost its lease while it ran (it may run elsewhere); stopped, "
                    "nothing recorded",
                    who,
                )
