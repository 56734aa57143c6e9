"""The face of a delivery: what differs between a typed job and a topic message while the
runner (``_runtime.runner``) handles it. A face finds and calls the handler, decides how the
run ended, and names the log fields and wording of the outcome; everything else (the middleware
chain, the settle, counting settle failures, releasing on shutdown) is the runner's, once for
both faces.

The two faces live in ``faces.job`` (typed jobs) and ``queuey.topics._face`` (topic messages, in
the topics layer, which sits above the runtime).
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor
from typing import Any, Protocol

from queuey._outcome import Outcome
from queuey.envelope import Envelope
from queuey.queues import QueueConfig

__all__ = ["Face"]


class Face(Protocol):
    """How one kind of delivery is handled.

    Attributes:
        log: the logger of this face's outcomes (``queuey.worker``, ``queuey.topics``).
    """

    log: logging.Logger

    async def run(self, envelope: Envelope, queue: QueueConfig, executor: Executor) -> Outcome:
        """Find ``envelope``'s handler, call it (plain handlers in ``executor``) and decide.

        Never raises, except ``CancelledError`` when the worker's own task is cancelled: a
        missing handler or an undecodable payload is an outcome too.
        """
        ...

    def on_loop(self, envelope: Envelope) -> bool:
        """Whether ``envelope``'s run never takes a thread (its handler is a coroutine
        function, or it has none): the runner then keeps no thread bookkeeping for it."""
        ...

    def failed(self, envelope: Envelope, queue: QueueConfig, error: BaseException) -> Outcome:
        """The outcome of a run that failed outside its handler with ``error`` (a middleware
        raised): decided as if the handler had raised it."""
        ...

    def fields(self, envelope: Envelope) -> dict[str, Any]:
        """The structured log fields (``extra``) of a delivery of ``envelope``."""
        ...

    def outcome_message(
        self, envelope: Envelope, outcome: Outcome
    ) -> tuple[str, tuple[object, ...]]:
        """This face's wording of ``outcome``: a ``%``-format and its arguments, logged on
        ``log`` with ``fields`` (the level is the outcome kind's, the same on both faces)."""
        ...
