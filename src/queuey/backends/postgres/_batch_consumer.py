"""The PostgreSQL consumer of a worker with batch handlers: ``PgConsumer`` that records a
batch's outcomes in one statement (``settle_batch``, ``BatchSettling``).

Every row of the statement is fenced as a single settle is (this owner, the attempt it ran, no
cancel asked for). A row the statement did not record (its claim lost, its cancel asked for, a
retry of a unique job, or a success or dead letter of a workflow step, which their own
statements handle, or every row when the statement failed) is left to the worker, which
settles it one by one: the single-job path then tells a lost claim from a cancel exactly as
for any job.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from queuey._outcome import Ack, DeadLetter, DeferFor, Outcome, RetryAfter
from queuey._text import clean_text
from queuey.attempts import AttemptError
from queuey.backends.base import Delivery
from queuey.backends.postgres._consumer import PgConsumer
from queuey.backends.postgres._delivery import PgDelivery, failure_json
from queuey.backends.postgres._settles import BatchRow
from queuey.backends.steps import WORKFLOW_HEADER
from queuey.errors import BackendError

__all__ = ["BatchingConsumer", "batch_row"]

log = logging.getLogger("queuey.postgres")


def batch_row(delivery: PgDelivery, outcome: Outcome) -> BatchRow | None:
    """The ``settle_batch`` row of ``outcome``, or ``None`` for one it does not record (a
    success carrying a result or of a workflow step, whose ``ack_results`` releases the steps
    waiting on it; a cancellation, a lost lease)."""
    envelope = delivery.envelope
    attempt = envelope.attempt
    match outcome:
        case Ack(result=None) if WORKFLOW_HEADER not in envelope.headers:
            return (envelope.job_id, attempt, "done", 0, 0, 0, 0.0, None, None)
        case RetryAfter(envelope=then, delay=delay, error=error, exception=exception):
            failure = failure_json(AttemptError.of(attempt, exception, error))
            seconds = delay.total_seconds()
            text = clean_text(error)
            return (
                envelope.job_id, attempt, "pending", then.attempt - 1, then.deferrals,
                then.priority, seconds, text, failure,
            )  # fmt: skip
        case DeferFor(envelope=then, delay=delay):
            seconds = delay.total_seconds()
            return (
                envelope.job_id, attempt, "pending", then.attempt - 1, then.deferrals,
                then.priority, seconds, None, None,
            )  # fmt: skip
        case DeadLetter(reason=reason, exception=exception):
            failure = failure_json(AttemptError.of(attempt, exception, reason))
            text = clean_text(reason)
            return (envelope.job_id, attempt, "failed", 0, 0, 0, 0.0, text, failure)
    return None


class BatchingConsumer(PgConsumer):
    """A ``PgConsumer`` that is also ``BatchSettling``."""

    async def settle_many(
        self, deliveries: Sequence[Delivery], outcomes: Sequence[Outcome]
    ) -> list[bool]:
        """Record the outcomes in one ``settle_batch`` statement (see the module); per
        delivery, whether it was recorded. Never raises ``BackendError`` (the rows are then
        left to be settled one by one)."""
        recorded = [False] * len(deliveries)
        rows: list[BatchRow] = []
        taken: list[tuple[int, PgDelivery]] = []
        for at, (delivery, outcome) in enumerate(zip(deliveries, outcomes, strict=True)):
            if isinstance(delivery, PgDelivery) and not delivery._completed:
                row = batch_row(delivery, outcome)
                if row is not None:
                    rows.append(row)
                    taken.append((at, delivery))
        if not rows:
            return recorded
        for _, delivery in taken:
            delivery._begin()  # PgDelivery's own bookkeeping, as its settles do
        try:
            done = await self.store.settle_batch(rows, self.ttl)
        except BackendError as exc:  # each is settled one by one (with its retries)
            log.warning("a batch's outcomes were not recorded at once: %s", exc)
            return recorded
        soonest: float | None = None
        for (at, delivery), row in zip(taken, rows, strict=True):
            if delivery.row_id in done:
                recorded[at] = True
                delivery._done()
                if row[2] == "pending":
                    soonest = row[6] if soonest is None else min(soonest, row[6])
        if soonest is not None:
            self.wake_after(soonest)
        return recorded
