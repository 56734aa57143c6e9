"""``Engine``: what the typed-job ``Worker`` and the topic ``Subscriber`` share, assembled
once: the runner (face + middleware), the consume loop, and the public surface over them
(``stats``, ``dead_letters``, ``settle_failures``, ``in_flight``, ``paused``, ``pause``,
``resume``, ``shutdown``).

The middleware chain is ``OutcomeLog`` (first), then what ``instrument`` adds (``Tracing``,
outermost around the run, then ``Measure``; none unless asked for), ``Stats``,
``Cancellation`` (each run's controls, and stopping a run whose job was cancelled), then the
face's own members (the worker's ``on_settled``), then the caller's ``middleware``, in order.

``ready`` is what a worker's ``/ready`` answers: running, pulling (not paused), not shutting
down, and the backend connected as far as it knows.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from queuey._runtime.cancellation import CANCEL_GRACE, Cancellation
from queuey._runtime.faces import Face
from queuey._runtime.loop import ConsumeLoop
from queuey._runtime.middleware import Chain, Middleware, OutcomeLog
from queuey._runtime.runner import Runner
from queuey._runtime.stats import QueueStats, Stats
from queuey._validation import check_int
from queuey.backends.base import Backend, Observable
from queuey.envelope import Envelope
from queuey.queues import QueueConfig

if TYPE_CHECKING:
    from queuey._runtime.metrics import Metrics

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
        processes: plain handlers run in child processes (which can be killed) instead of
            threads.

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
        processes: bool = False,
    ) -> None:
        self.backend = backend
        self.concurrency = check_int(concurrency, "concurrency", low=1)
        self._configs = list(configs)
        counters = Stats(config.name for config in self._configs)
        self.stats: dict[str, QueueStats] = counters.queues
        self.dead_letters: deque[tuple[Envelope, str]] = counters.dead_letters
        cancellation = Cancellation(cancel_grace)
        self._chain_face = face
        self._members = [counters, cancellation, *middleware]
        self._runner = Runner(face, [OutcomeLog(face), *self._members])
        self.tracing: object = False
        self.metrics: Metrics | None = None
        self._consuming = False
        self._loop = ConsumeLoop(
            backend,
            self._configs,
            self._runner.bind,
            concurrency=self.concurrency,
            shutdown_grace=shutdown_grace,
            paused=paused,
            thread_name_prefix=thread_name_prefix,
            in_thread=self._runner.in_thread,
            processes=processes,
            lanes=self._runner.lanes,
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

    @property
    def ready(self) -> bool:
        """Whether this runs and pulls: started, not paused, not shutting down, and its
        backend connected as far as it knows (what ``/ready`` answers)."""
        if not self._consuming or self._loop.paused or self._loop.stopping:
            return False
        backend = self.backend
        return backend.connected if isinstance(backend, Observable) else True

    def instrument(self, *, tracing: object = False, metrics: Metrics | None = None) -> None:
        """Trace and measure every run from now on, replacing an earlier ``instrument``.

        Args:
            tracing: ``True`` for a CONSUMER span per run from the global OpenTelemetry
                tracer provider, or a ``TracerProvider`` to use; ``False`` for none.
            metrics: the ``queuey.observability.Metrics`` to feed (outcomes, durations,
                lag, in-flight; queue depth while ``run`` runs); ``None`` for none.

        Raises:
            ConfigError: the ``otel`` (or ``metrics``) extra is not installed, or
                ``tracing`` is not a tracer provider.
            RuntimeError: ``run`` is running (the chain is fixed while it runs).
        """
        if self._running:
            raise RuntimeError("instrument before run, not while it runs")
        observers: list[Middleware] = []
        if tracing is not False and tracing is not None:
            from queuey._runtime.tracing import Tracing, system_of

            observers.append(Tracing(system_of(self.backend), tracing))
        if metrics is not None:
            from queuey._runtime.metrics import Measure

            observers.append(Measure(metrics))
        self.tracing, self.metrics = tracing, metrics
        self._runner.chain = Chain(
            [OutcomeLog(self._chain_face), *observers, *self._members], self._chain_face
        )

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

    def _consumed(self) -> list[QueueConfig]:
        """The queues as consumed now (the worker narrows them to its handlers' job types)."""
        return self._configs

    async def _consume(self) -> None:
        """Declare the queues, then consume until ``shutdown`` (reading the queue depths
        meanwhile when measured)."""
        self._loop.configs = self._consumed()
        await self.backend.declare(self._loop.configs)
        async with self._sampling():
            self._consuming = True
            try:
                await self._loop.run()
            finally:
                self._consuming = False

    @asynccontextmanager
    async def _sampling(self) -> AsyncIterator[None]:
        """Reads the queue depths into ``metrics`` in the background for the block."""
        if self.metrics is None:
            yield
            return
        from queuey._runtime.metrics import DepthSampler

        task = asyncio.create_task(DepthSampler(self.backend, self.metrics).run())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
