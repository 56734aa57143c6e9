"""``Cancellation``: the built-in middleware that gives every run its controls and stops a
run whose job was cancelled, for both faces.

Around each call it opens the delivery's ``RunScope`` (``_run_scope``: ``ctx.cancelled``,
``ctx.cancellation()``, ``ctx.transaction()``). When the backend reports that the job was
cancelled while it runs (``Delivery.cancel_requested``: PostgreSQL through a NOTIFY to the
job's worker, memory at once), the handler sees ``ctx.cancelled`` at once and has ``grace`` to
return at a safe point; past it, its task is cancelled (a plain handler's thread cannot be
stopped: it is abandoned, as on a timeout). Either way the outcome is ``Cancelled``: the
backend already holds the job as cancelled and refuses any other outcome of the run, so it is
not retried. No task is created per delivery: a callback on the request arms a timer that
cancels the running task.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from queuey._outcome import Outcome
from queuey._run_scope import CURRENT_RUN, RunScope
from queuey._runtime.middleware import CallNext, Unguarded
from queuey._runtime.returned import refuse_database_transaction
from queuey._runtime.settle import stopped
from queuey.backends.base import Delivery

__all__ = ["CANCEL_GRACE", "Cancellation"]

CANCEL_GRACE = timedelta(seconds=5)
"""How long a cancelled handler may take to return on its own before its task is cancelled."""


class _Watch:
    """Cancels ``task`` ``grace`` seconds after the job's cancel request."""

    def __init__(self, task: asyncio.Task[object], grace: float) -> None:
        self.task = task
        self.grace = grace
        self.fired = False
        self._timer: asyncio.TimerHandle | None = None

    def requested(self, request: asyncio.Future[None]) -> None:
        if request.cancelled():
            return
        self._timer = asyncio.get_running_loop().call_later(self.grace, self._fire)

    def _fire(self) -> None:
        self.fired = True
        self.task.cancel()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class Cancellation(Unguarded):
    """Opens each run's scope and stops runs whose job was cancelled (see the module).

    Args:
        grace: how long a cancelled handler may take to stop on its own.
    """

    def __init__(self, grace: timedelta = CANCEL_GRACE) -> None:
        self.grace = grace.total_seconds()

    async def around_call(self, delivery: Delivery, call_next: CallNext) -> Outcome:
        """Run the delivery in its scope; ``Cancelled`` when its job was cancelled meanwhile.

        Raises:
            CancelledError: the worker's own task was cancelled (shutdown), not the job.
        """
        request = delivery.cancel_requested
        report = getattr(delivery, "report_progress", None)
        # TransactionalDelivery, read as an attribute: an isinstance check per run costs more
        transaction = getattr(delivery, "transaction", refuse_database_transaction)
        token = CURRENT_RUN.set(RunScope(request, transaction, report))
        task = asyncio.current_task()
        try:
            if request is None or task is None:
                return await call_next(delivery)
            if request.done():  # cancelled between its claim and its run: do not start it
                return stopped(delivery)
            # one coroutine frame for both: this runs once per job
            watch = _Watch(task, self.grace)
            request.add_done_callback(watch.requested)
            try:
                outcome = await call_next(delivery)
            except asyncio.CancelledError:
                if not watch.fired:
                    raise
                task.uncancel()
                return stopped(delivery)
            finally:
                request.remove_done_callback(watch.requested)
                watch.stop()
            return stopped(delivery) if request.done() else outcome
        finally:
            CURRENT_RUN.reset(token)
