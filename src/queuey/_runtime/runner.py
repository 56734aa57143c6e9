"""One delivery, start to end, for either face (River's executor and completer in one place):

1. the middleware chain wraps the face's run (find the handler, call it, decide) and yields an
   ``Outcome``;
2. the outcome is settled (``settle``: the one place it becomes backend I/O);
3. a settle that fails is counted once in ``settle_failures`` and shown to the middleware
   (``on_settle_failure``); one that succeeds is shown to them too (``on_outcome``).

An outcome the backend refused for good (``settle.refused``: a value out of its range, a
constraint; not a lost connection) can never be recorded: after counting that failure the
runner records a dead letter saying which outcome could not be recorded and why
(``settle.unrecordable``), shown to the middleware like any outcome, so the job never stays
claimed until its lease only to fail the same way on every run. If even that is not recorded
(counted too), the delivery is left to the backend's redelivery, as any failed settle. A
settle refused because the job was cancelled while it ran (the backend says so through
``Delivery.cancel_requested``, possibly only once it refused) is that run's cancellation: it is
recorded as ``Cancelled``, not counted as a failure.

An outcome is settled only once no thread runs the delivery's plain handler: a run that a
middleware or a cancellation gave up on while its thread runs on waits for the thread, keeping
its job held and its slot taken (a plain handler past its timeout already waits in ``invoke``).
When the worker's own task is cancelled (shutdown past its grace, or forced) while the delivery
runs, the delivery is released untouched and the cancellation goes on, unless a thread still
runs its plain handler (``in_thread``): that job is not handed back while it runs here. Nothing
else escapes: a middleware raising around the call (or the run failing outside its handler, a
bug) counts as a failed run, logged at ERROR; a hook raising after the settle is logged.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import Executor
from typing import Any

from queuey._outcome import Ack, Cancelled, DeferFor, LeaseLost, Outcome, RetryAfter
from queuey._runtime.batch_lanes import BatchLanes, Started
from queuey._runtime.cancellation import Cancellation
from queuey._runtime.faces import Face
from queuey._runtime.faces.job import JobFace
from queuey._runtime.middleware import CallNext, Chain, Failed, Middleware
from queuey._runtime.settle import refused, release, settle, stopped, unrecordable
from queuey._runtime.threads import RunThreads
from queuey.backends.base import Delivery
from queuey.backends.batch_settle import BatchSettling
from queuey.queues import QueueConfig

__all__ = ["Process", "Ran", "Runner"]

Process = Callable[[Delivery], Coroutine[Any, Any, None]]
"""Handles and settles one delivery of a bound queue; raises only ``CancelledError``."""

Ran = Callable[[Delivery], None]
"""Told that a delivery's handler has ended (its thread too) and its outcome is about to be
settled: the worker frees the delivery's handler slot there, not once the settle has landed."""


class Runner:
    """Runs deliveries through ``face`` and ``middleware``.

    Args:
        face: how to find, call and decide a delivery's handler.
        middleware: the chain, outermost (first notified) first.

    Raises:
        ConfigError: a member of ``middleware`` is not a ``Middleware``.
    """

    def __init__(self, face: Face, middleware: Iterable[Middleware]) -> None:
        self._face = face
        self.chain = Chain(middleware, face)
        self._settle_failures = 0
        self._runs: dict[int, RunThreads] = {}  # by id(delivery): a delivery need not hash

    @property
    def settle_failures(self) -> int:
        """Outcomes the backend could not record (each shown to the middleware)."""
        return self._settle_failures

    def in_thread(self, delivery: Delivery) -> bool:
        """Whether a thread runs ``delivery``'s plain handler now (it cannot be cancelled)."""
        run = self._runs.get(id(delivery))
        return run is not None and run.running

    def bind(self, queue: QueueConfig, executor: Executor, ran: Ran | None = None) -> Process:
        """The ``Process`` of ``queue``'s deliveries, plain handlers running in ``executor``;
        ``ran(delivery)`` is called once a delivery's handler has ended (its thread too), before
        its outcome is settled.

        The chain is built here, once per consumer session, not per delivery.
        """
        face = self._face
        runs = self._runs

        def call(delivery: Delivery) -> Coroutine[Any, Any, Outcome]:
            envelope = delivery.envelope
            if face.on_loop(envelope):  # no thread is ever taken: nothing to keep per run
                return face.run(envelope, queue, executor)
            threads = runs.get(id(delivery))
            if threads is None:
                threads = runs[id(delivery)] = self._threads(executor, delivery)
            return face.run(envelope, queue, threads)

        def failed(delivery: Delivery, error: BaseException) -> Outcome:
            return face.failed(delivery.envelope, queue, error)

        chained = self.chain.wrap(call, failed)
        return functools.partial(self.process, chained, failed, ran=ran)

    def lanes(
        self, queue: QueueConfig, consumer: object, ran: Ran, started: Started
    ) -> BatchLanes | None:
        """The batch path of ``queue``'s batch handlers (``_runtime.batch_lanes``), or ``None``
        when it does not apply: no batch handler of the queue, a consumer that cannot record
        many outcomes at once, or a middleware other than ``Cancellation`` wrapping calls."""
        face = self._face
        if not isinstance(face, JobFace) or not isinstance(consumer, BatchSettling):
            return None
        if any(type(member) is not Cancellation for member in self.chain.wrapping):
            return None
        lanes = BatchLanes(face, queue, consumer, self.settle_one, self.chain.settled, ran, started)
        return lanes if lanes else None

    async def settle_one(self, delivery: Delivery, outcome: Outcome) -> None:
        """Record ``outcome`` of ``delivery`` as any delivery's is (a dead letter in its place
        when refused for good; a failure counted and shown to the middleware)."""
        await self._settle(delivery, outcome)

    def _threads(self, executor: Executor, delivery: Delivery) -> RunThreads:
        face = self._face

        def describe() -> tuple[str, dict[str, Any]]:
            envelope = delivery.envelope
            return f"job {envelope.job_type} {envelope.job_id}", face.fields(envelope)

        return RunThreads(executor, describe, face.log)

    async def process(
        self, call: CallNext, failed: Failed, delivery: Delivery, ran: Ran | None = None
    ) -> None:
        """Run ``delivery`` through ``call`` (the chain), settle the outcome and notify the
        chain; a run that raises (a bug: the chain turns a middleware's failure into an
        outcome) is logged and decided by ``failed``. ``ran(delivery)`` is called between the
        run's end (its handler thread's too) and the settle.

        Raises:
            CancelledError: the calling task was cancelled (the delivery was released, unless
                a thread still runs its handler).
        """
        try:
            try:
                outcome = await call(delivery)
            except asyncio.CancelledError:
                if not self.in_thread(delivery):
                    await release(delivery)
                raise
            except BaseException as exc:
                fields = self._face.fields(delivery.envelope)
                self._face.log.error(
                    "the run failed outside its handler", exc_info=exc, extra=fields
                )
                outcome = failed(delivery, exc)
            if id(delivery) in self._runs:
                await self._thread_ended(delivery)
        finally:
            self._runs.pop(id(delivery), None)
        if ran is not None:
            ran(delivery)
        await self._settle(delivery, outcome)

    async def _thread_ended(self, delivery: Delivery) -> None:
        """Return once no thread runs ``delivery``'s plain handler: a run given up on while its
        thread runs (a middleware's own timeout, a cancellation) keeps its job and its slot
        until the thread ends, so the job never runs twice at once.

        Raises:
            CancelledError: the calling task was cancelled (the delivery was released once
                its thread had ended, else left held).
        """
        run = self._runs.get(id(delivery))
        if run is None or not run.running:
            return
        run.outlived()
        try:
            await run.ended()
        except asyncio.CancelledError:
            if not run.running:
                await release(delivery)
            raise

    async def _settle(self, delivery: Delivery, outcome: Outcome) -> Exception | None:
        """Record ``outcome``, else a dead letter in its place if it was refused for good;
        returns the last failure (``None`` once something was recorded)."""
        error = await self._record(delivery, outcome)
        if error is not None and refused(error):
            return await self._record(delivery, unrecordable(outcome, error))
        return error

    async def _record(self, delivery: Delivery, outcome: Outcome) -> Exception | None:
        try:
            if type(outcome) is Ack and outcome.result is None:  # most runs: one frame less
                await delivery.ack()
            else:
                await settle(delivery, outcome)
        except Exception as exc:
            if not isinstance(outcome, Cancelled | LeaseLost) and cancelled_meanwhile(delivery):
                return await self._record(delivery, stopped(delivery))
            self._settle_failures += 1
            self.chain.settle_failed(delivery, outcome, exc)
            return exc
        self.chain.settled(delivery, as_recorded(delivery, outcome))
        return None


def as_recorded(delivery: Delivery, outcome: Outcome) -> Outcome:
    """``outcome`` as the backend recorded it: a retry or deferral of a unique job whose key
    another job took while it ran ends cancelled instead (``superseded_by``, set by the
    delivery's settle on PostgreSQL and in memory)."""
    rival = getattr(delivery, "superseded_by", None)
    if rival is not None and isinstance(outcome, RetryAfter | DeferFor):
        return Cancelled(superseded_by=rival, replaced=outcome.text)
    return outcome


def cancelled_meanwhile(delivery: Delivery) -> bool:
    """Whether ``delivery``'s job was cancelled while it ran (``Delivery.cancel_requested``):
    its outcome was then refused because the backend holds the job as cancelled, which is the
    run's true end, not a failure to record it."""
    request = delivery.cancel_requested
    return request is not None and request.done() and not request.cancelled()
