"""The batch path: deliveries of a batch-handled job type run as one batch, not one by one.

When the consumer can record many outcomes at once (``BatchSettling``: PostgreSQL) and no
middleware wraps the calls but the built-in ``Cancellation`` (no tracing, no metrics, none of
the caller's ``around_call``), a delivery of a batch-handled type joins its type's lane instead
of getting a task of its own. A lane runs a batch once ``size`` deliveries wait or ``wait``
after the first, in one task:

1. a delivery whose job was cancelled before the batch started ends ``Cancelled`` unrun;
2. the payloads are validated by one ``TypeAdapter(list[J])`` call (job by job only when that
   fails, to dead-letter exactly the ones that do not decode, or for a workflow step);
3. the handler is called once (under the worker's ``job_timeout``), every job with its own
   ``JobContext``, while the backend keeps renewing every row's lease;
4. each item's ending is decided under its job's retry policy (a job cancelled meanwhile
   ends ``Cancelled``, as the ``Cancellation`` middleware decides), the slots are freed, and
   the outcomes are recorded by ``BatchSettling.settle_many`` in one statement, fenced per row;
   every outcome it did not record is settled one by one by the runner, as any delivery's
   (a lost claim or a cancel told apart, a refused value dead-lettered, a failure counted).

Every outcome is shown to the middleware (``on_outcome``, ``on_settle_failure``: the stats,
the outcome log, the worker's ``on_settled``). A batch task cancelled by shutdown hands every
delivery back untouched. Any other consumer (memory, RabbitMQ), or a worker whose middleware
wraps calls, runs batch handlers through ``_runtime.batches`` (each delivery its own task).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from queuey._outcome import DeadLetter, Outcome, clean_text, decide
from queuey._run_scope import RunScope
from queuey._runtime.batches import Batcher
from queuey._runtime.faces.job import JobFace, job_context
from queuey._runtime.returned import refuse_batch_transaction
from queuey._runtime.settle import release, stopped
from queuey.backends.base import Delivery
from queuey.backends.batch_settle import BatchSettling
from queuey.batching import BatchContext
from queuey.jobs import JobContext
from queuey.queues import QueueConfig
from queuey.workflows import STEP_KEY, built_job

__all__ = ["BatchLanes", "Started"]

Started = Callable[[asyncio.Task[None], list[Delivery]], None]
"""Told of each batch task and its deliveries as it starts (the loop tracks them)."""

Settle = Callable[[Delivery, Outcome], Awaitable[object]]
"""Settles one delivery as any is (the runner's ``settle_one``)."""

Settled = Callable[[Delivery, Outcome], None]
"""Shows a recorded outcome to the middleware (the chain's ``settled``)."""


class BatchLanes:
    """The lanes of one consumer's batch-handled job types.

    Args:
        face: the job face (its batch handlers and deferral bounds).
        queue: the queue consumed.
        settler: the consumer, which records many outcomes at once.
        settle_one: settles an outcome the settler did not record.
        settled: shows a recorded outcome to the middleware.
        ran: told once a delivery's run has ended (its slot is freed).
        started: told of each batch task.
    """

    def __init__(
        self,
        face: JobFace,
        queue: QueueConfig,
        settler: BatchSettling,
        settle_one: Settle,
        settled: Settled,
        ran: Callable[[Delivery], None],
        started: Started,
    ) -> None:
        self._lanes = {
            name: _Lane(self, batcher) for name, batcher in face.batchers(queue.name).items()
        }
        self.face = face
        self.queue = queue
        self.settler = settler
        self.settle_one = settle_one
        self.settled = settled
        self.ran = ran
        self.started = started

    def __bool__(self) -> bool:
        return bool(self._lanes)

    def offer(self, delivery: Delivery) -> bool:
        """Take ``delivery`` into its type's lane; false when its type has no batch handler."""
        lane = self._lanes.get(delivery.envelope.job_type)
        if lane is None:
            return False
        lane.add(delivery)
        return True

    def flush(self) -> None:
        """Start every lane's waiting deliveries now (the consumer has ended)."""
        for lane in self._lanes.values():
            lane.flush()


class _Lane:
    """The waiting deliveries of one batch handler, and the batches it starts."""

    def __init__(self, lanes: BatchLanes, batcher: Batcher) -> None:
        self._lanes = lanes
        self._batcher = batcher
        self._adapter: TypeAdapter[list[Any]] = TypeAdapter(list[batcher.job_type])  # type: ignore[name-defined]
        self._waiting: list[Delivery] = []
        self._timer: asyncio.TimerHandle | None = None

    def add(self, delivery: Delivery) -> None:
        self._waiting.append(delivery)
        if len(self._waiting) >= self._batcher.size:
            self.flush()
        elif self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._batcher.wait, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deliveries, self._waiting = self._waiting, []
        if deliveries:
            task = asyncio.create_task(self._run(deliveries))
            self._lanes.started(task, deliveries)

    async def _run(self, deliveries: list[Delivery]) -> None:
        lanes = self._lanes
        try:
            outcomes = await self._outcomes(deliveries)
        except asyncio.CancelledError:  # shutdown: every delivery handed back untouched
            for delivery in deliveries:
                await release(delivery)
            raise
        for delivery in deliveries:
            lanes.ran(delivery)
        recorded = await lanes.settler.settle_many(deliveries, outcomes)
        alone = []
        for delivery, outcome, done in zip(deliveries, outcomes, recorded, strict=True):
            if done:
                lanes.settled(delivery, outcome)
            else:
                alone.append(lanes.settle_one(delivery, outcome))
        if alone:
            await asyncio.gather(*alone)

    async def _outcomes(self, deliveries: Sequence[Delivery]) -> list[Outcome]:
        """Each delivery's outcome: run by one call of the handler, or ended without it."""
        outcomes: list[Outcome | None] = [None] * len(deliveries)
        running: list[int] = []
        for at, delivery in enumerate(deliveries):
            request = delivery.cancel_requested
            if request is not None and request.done():
                outcomes[at] = stopped(delivery)  # cancelled before its batch started
            else:
                running.append(at)
        jobs = self._decoded([deliveries[at] for at in running], outcomes, running)
        ran = [at for at in running if outcomes[at] is None]
        if ran:
            contexts = [self._context(deliveries[at]) for at in ran]
            context = BatchContext(self._lanes.queue.name, tuple(contexts))
            endings = await self._batcher.endings([jobs[at] for at in ran], context)
            for at, ending in zip(ran, endings, strict=True):
                outcomes[at] = self._decide(deliveries[at], ending)
        return [outcome for outcome in outcomes if outcome is not None]

    def _decoded(
        self, deliveries: list[Delivery], outcomes: list[Outcome | None], where: list[int]
    ) -> dict[int, Any]:
        """The jobs of ``deliveries`` (at positions ``where``) by position, validated in one
        call; a payload that does not decode gets its dead letter in ``outcomes``."""
        payloads = [delivery.envelope.payload for delivery in deliveries]
        if not any(isinstance(p, dict) and STEP_KEY in p for p in payloads):
            try:
                return dict(zip(where, self._adapter.validate_python(payloads), strict=True))
            except ValidationError:
                pass  # find which ones, job by job
        jobs: dict[int, Any] = {}
        for at, payload in zip(where, payloads, strict=True):
            try:
                jobs[at] = built_job(self._batcher.job_type, payload)
            except ValidationError as exc:
                detail = f"{exc.errors()[0]['msg']} ({exc.error_count()} errors)"
                outcomes[at] = DeadLetter(clean_text(f"decode error: {detail}"))
            except Exception as exc:  # a workflow step's builder may raise anything
                text = f"step builder error: {type(exc).__name__}: {exc}"
                outcomes[at] = DeadLetter(clean_text(text))
        return jobs

    def _context(self, delivery: Delivery) -> JobContext:
        """The job's ``JobContext``: its cancel and progress; no handler transaction."""
        context = job_context(delivery.envelope, self._batcher.retry.max_attempts)
        report = getattr(delivery, "report_progress", None)
        scope = RunScope(delivery.cancel_requested, refuse_batch_transaction, report)
        vars(context)["run_scope"] = scope
        return context

    def _decide(self, delivery: Delivery, ending: BaseException | None) -> Outcome:
        request = delivery.cancel_requested
        if request is not None and request.done():
            return stopped(delivery)  # cancelled while its batch ran
        queue = self._lanes.queue
        policy = self._batcher.retry
        deferrals = self._lanes.face.deferrals
        return decide(delivery.envelope, ending, policy, queue.top_priority, None, deferrals)
