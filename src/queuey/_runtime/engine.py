"""``Engine``: what the typed-job ``Worker`` and the topic ``Subscriber`` share, assembled
once: the runner (face + middleware), the consume loop, and the public surface over them
(``stats``, ``dead_letters``, ``settle_failures``, ``in_flight``, ``paused``, ``pause``,
``resume``, ``shutdown``).

The middleware chain is ``OutcomeLog`` (first), ``Stats``, ``Cancellation`` (each run's
controls, and stopping a run whose job was cancelled), then the face's own members (the
worker's ``on_settled``), then the caller's ``middleware``, in order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta

from queuey._runtime.cancellation import CANCEL_GRACE, Cancellation
from queuey._runtime.faces import Face
from queuey._runtime.loop import ConsumeLoop
from queuey._runtime.middleware import Middleware, OutcomeLog
from queuey._runtime.runner import Runner
from queuey._runtime.stats import QueueStats, Stats
from queuey._validation import check_int
from queuey.backends.base import Backend
from queuey.envelope import Envelope
from queuey.queues import QueueConfig

__all__ = ["Engine"]


class Engine:
    """Consumes ``configs`` on ``backend``, each delivery run by ``face`` through the chain.

    Args:
        backend: the transport.
        face: how deliveries are handled.
        configs: the queues (or topics) consumed.
        concurrency: deliveries handled at once, and threads for plain handlers.
        shutdown_grace: how long shutdown waits for running handlers (``None``: no limit).
        paused: start paused.
        middleware: the members after the built-in ones, in order.
        thread_name_prefix: names the handler threads.
        cancel_grace: how long a handler whose job was cancelled may take to stop on its own
            before its task is cancelled.

    Attributes:
        backend: the transport.
        concurrency: deliveries handled at once.
        stats: per queue (or topic) name, the outcomes observed (``QueueStats``).
        dead_letters: the last 100 ``(envelope, reason)`` pairs dead-lettered.

    Raises:
        ConfigError: ``concurrency`` is not a whole number >= 1 (a bool and a float are not),
            or a member of ``middleware`` is not a ``Middleware``.
    """

    def __init__(
        self,
        backend: Backend,
        face: Face,
        configs: Sequence[QueueConfig],
        *,
        concurrency: int,
        shutdown_grace: timedelta | None,
        paused: bool,
        middleware: Sequence[Middleware],
        thread_name_prefix: str,
        cancel_grace: timedelta = CANCEL_GRACE,
    ) -> None:
        self.backend = backend
        self.concurrency = check_int(concurrency, "concurrency", low=1)
        self._configs = list(configs)
        counters = Stats(config.name for config in self._configs)
        self.stats: dict[str, QueueStats] = counters.queues
        self.dead_letters: deque[tuple[Envelope, str]] = counters.dead_letters
        cancellation = Cancellation(cancel_grace)
        self._runner = Runner(face, [OutcomeLog(face), counters, cancellation, *middleware])
        self._loop = ConsumeLoop(
            backend,
            self._configs,
            self._runner.bind,
            concurrency=self.concurrency,
            shutdown_grace=shutdown_grace,
            paused=paused,
            thread_name_prefix=thread_name_prefix,
            in_thread=self._runner.in_thread,
        )
        self._running = False

    @property
    def settle_failures(self) -> int:
        """Outcomes the backend could not record (each logged at ERROR). One refused for good
        is dead-lettered instead, with a reason saying so; otherwise the delivery comes again
        later."""
        return self._runner.settle_failures

    @property
    def in_flight(self) -> int:
        """Deliveries being handled now."""
        return self._loop.in_flight

    @property
    def paused(self) -> bool:
        """Whether pulling is paused (see ``pause``)."""
        return self._loop.paused

    @property
    def middleware(self) -> tuple[Middleware, ...]:
        """The whole chain, built-in members first, in the order hooks run."""
        return self._runner.chain.middleware

    def pause(self) -> None:
        """Stop pulling new deliveries; those already pulled still run. Publishing is
        unaffected, so deliveries wait until ``resume``. Idempotent; may be called before
        ``run``."""
        self._loop.pause()

    def resume(self) -> None:
        """Pull again after ``pause``. Idempotent."""
        self._loop.resume()

    def shutdown(self, *, force: bool = False) -> None:
        """Ask ``run`` to stop: stop pulling, finish what was pulled and what runs, return.

        Idempotent; may be called before ``run``. With ``force=True`` (a second SIGINT/SIGTERM
        under the CLI) running handlers are cancelled at once and their deliveries handed back
        to the backend, to be delivered again (at-least-once).
        """
        self._loop.shutdown(force=force)

    @contextmanager
    def _exclusive(self, noun: str) -> Iterator[None]:
        """Marks ``run`` as running for the block.

        Raises:
            RuntimeError: ``run`` is already running.
        """
        if self._running:
            raise RuntimeError(f"this {noun} is already running")
        self._running = True
        try:
            yield
        finally:
            self._running = False

    async def _consume(self) -> None:
        """Declare the queues, then consume until ``shutdown``."""
        await self.backend.declare(self._configs)
        await self._loop.run()
