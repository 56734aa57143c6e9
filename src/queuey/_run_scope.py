"""What a running handler may ask of its run, beyond the facts of its context: whether the job
was cancelled (``cancelled``, ``cancellation()``) and a database transaction that completes
the job with the handler's writes (``transaction()``).

The runtime's ``Cancellation`` middleware (``_runtime.cancellation``) opens a ``RunScope`` for
each delivery in a context variable around the handler call; each face reads it once, on the
event loop, when it builds the handler's context (``JobContext``, ``MessageContext``), so a
plain handler running in a thread sees it too. ``RunControls`` is the handler-facing side,
shared by both contexts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from queuey.errors import NotSupportedError
from queuey.progress import Progress, progress_of

__all__ = ["CURRENT_RUN", "RunControls", "RunScope", "current_run"]


@dataclass(frozen=True, slots=True)
class RunScope:
    """One delivery's controls.

    Attributes:
        cancel: done once the job was cancelled while it runs (``None``: the backend cannot
            reach a running job).
        transaction: opens the handler's transaction (the delivery's ``transaction``).
        report: keeps the run's last progress (the delivery's ``report_progress``; ``None``
            when the backend keeps none).
    """

    cancel: asyncio.Future[None] | None
    transaction: Callable[[], AbstractAsyncContextManager[Any]]
    report: Callable[[Progress], None] | None = None


CURRENT_RUN: ContextVar[RunScope | None] = ContextVar("queuey_run", default=None)
"""The scope of the delivery whose handler runs in this context."""


def current_run() -> RunScope | None:
    """The scope of the delivery being run here, if any."""
    return CURRENT_RUN.get()


def _no_transaction() -> AbstractAsyncContextManager[Any]:
    raise NotSupportedError("ctx.transaction() is only available inside a running handler")


class RunControls:
    """The run controls of a handler's context (mixed into ``JobContext`` and
    ``MessageContext``, which carry a ``RunScope`` as ``run_scope``)."""

    run_scope: RunScope | None

    @property
    def cancelled(self) -> bool:
        """True once the job was cancelled while this handler runs: stop at the next safe
        point (the handler's task is cancelled after the worker's ``cancel_grace``, and the
        job ends ``cancelled`` however the handler returns)."""
        scope = self.run_scope
        return scope is not None and scope.cancel is not None and scope.cancel.done()

    async def cancellation(self) -> None:
        """Wait until the job is cancelled (forever on a backend that cannot cancel a running
        job). For an async handler that wants to race its work against a cancel."""
        scope = self.run_scope
        if scope is None or scope.cancel is None:
            await asyncio.Event().wait()
            return
        await asyncio.shield(scope.cancel)

    def progress(self, value: float, total: int | None = None, *, note: str | None = None) -> None:
        """Report how far the job is: a fraction (``ctx.progress(0.4)``) or a count
        (``ctx.progress(40, total=100)``), with an optional ``note``. No round trip: the
        backend keeps the last report and writes it with the run's next heartbeat
        (PostgreSQL: within about a second); ``producer.job(id).progress``, ``handle.progress()``,
        ``queuey jobs show`` and the dashboard's job page show it. Safe from a plain handler's
        thread. A backend that keeps no per-job state (RabbitMQ) drops it.

        Raises:
            ValueError: a fraction outside ``0..1``, a count outside ``0..total``, a ``total``
                below 1.
        """
        reported = progress_of(value, total, note)
        scope = self.run_scope
        if scope is not None and scope.report is not None:
            scope.report(reported)

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        """``async with ctx.transaction() as conn:``: a database transaction (PostgreSQL: a
        psycopg ``AsyncConnection`` from the backend's pool) in which the handler's writes and
        the job's completion commit together, or neither does. The completion is fenced by
        (owner, attempt): a worker that lost its claim, or a job cancelled meanwhile, cannot
        commit it (the transaction is rolled back and ``LostClaimError``, a ``BackendError``,
        raised and logged). Use it once, at the end of the handler's work: the job is done when
        it commits, and a failure after it is not recorded.

        Raises:
            NotSupportedError: the backend has none (memory, RabbitMQ), or called outside a
                running handler.
        """
        scope = self.run_scope
        return _no_transaction() if scope is None else scope.transaction()
