"""Recording outcomes: the rows this process holds, and the fenced statements that settle them.

Acks go through ``AckBatch`` (many per statement); a retry, deferral, dead letter or release is
one fenced statement each. Every settle must land: one that cannot reach the database is kept
by the backend's ``Recovery`` and written once the database is back (the leases renewed first),
so an outage shorter than the lease costs no second run; only when the lease may have expired
first is the outcome reported as not recorded, and the row is redelivered after its lease
(at-least-once, never lost). A release (a run handed back untouched, at shutdown) is not kept:
it is retried with backoff (0.2 s, doubling, 5 attempts), then left to the lease. A settle the
database refuses for the values it carries (``RefusedError``: a delay past its timestamp range, a
constraint) is not retried: it raises ``RefusedError`` at once, and the runner records a dead
letter in its place. A settle whose fence fails (another worker took the row after the lease
expired) raises ``LostClaimError``.

``held`` is what the heartbeat extends: a row is held from its claim until its settle is done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from queuey.backends.postgres._acks import AckBatch, lost_claim
from queuey.backends.postgres._errors import DatabaseUnavailableError, RefusedError
from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._recovery import Recovery
from queuey.backends.postgres._store import Store
from queuey.errors import BackendError

__all__ = ["SETTLE_ATTEMPTS", "Completer", "landed"]

T = TypeVar("T")
R = TypeVar("R")

SETTLE_ATTEMPTS = 5
"""Tries of a settle statement across lost connections."""


async def landed(statement: Callable[[], Awaitable[T]]) -> T:
    """Run ``statement`` until it lands, retrying lost connections with backoff (never a
    refused statement: it would fail the same way).

    Raises:
        BackendError: the database stayed unreachable, or failed the statement.
        RefusedError: the database refused the statement for its values.
    """
    for attempt in range(SETTLE_ATTEMPTS - 1):
        try:
            return await statement()
        except DatabaseUnavailableError:
            await asyncio.sleep(0.2 * 2**attempt)
    return await statement()


class Completer:
    """Settles the rows one backend claimed, through its store. Every method raises
    ``LostClaimError`` when the fence refused the outcome (the claim was lost), ``RefusedError``
    when the database refused the statement for its values, and ``BackendError`` when the
    database stayed unreachable (the row is then redelivered after its lease).

    Args:
        store: the backend's store.
        results_channel: where ``ack_results`` announces the results it writes.
        recovery: keeps the outcomes the database could not take (by default one of its own
            over ``store``, with its lease).
    """

    def __init__(
        self, store: Store, results_channel: str = "", recovery: Recovery | None = None
    ) -> None:
        self.recovery = recovery or Recovery(store, store.lease, Outage("PostgreSQL"))
        self.held = self.recovery.held
        self.progress: dict[str, str] = {}
        """The last progress reported per held row (JSON text), until the heartbeat writes it."""
        self._store = store
        self._results_channel = results_channel
        self._acks = AckBatch(self._record_acks, self._record_acks)
        self._refused: dict[str, RefusedError] = {}

    def hold(self, row_ids: Iterable[str]) -> None:
        """Rows just claimed: keep their leases alive until they are settled."""
        self.held.update(row_ids)

    async def ack(
        self, row_id: str, attempts: int, result: str | None = None, feeds: bool = False
    ) -> None:
        """Record the success of ``row_id``'s run ``attempts`` (batched with other acks), with
        its ``result`` (JSON text) when given, written and announced by the same fenced
        statement; ``feeds``: the row is a workflow step (``ack_results`` then records it
        even without a result, releasing the steps waiting on it)."""
        try:
            if not await self._acks.submit(row_id, attempts, result, feeds):  # one frame less
                refusal = self._refused.pop(row_id, None)
                if refusal is not None:
                    raise refusal
                raise lost_claim(row_id)
        finally:
            self._refused.pop(row_id, None)
            self.held.discard(row_id)

    async def _record_acks(
        self,
        ids: Sequence[str],
        attempts: Sequence[int],
        results: Sequence[str | None] | None = None,
    ) -> set[str]:
        """The ids of the batch recorded. A batch the database refuses is recorded row by row,
        so only the rows it refuses fail (with their ``RefusedError``)."""
        try:
            lost = await self.recovery.landed(
                lambda store: self._statement(store, ids, attempts, results)
            )
        except RefusedError as exc:
            if len(ids) == 1:
                self._refused[ids[0]] = exc
                return set()
            recorded: set[str] = set()
            for at, (row_id, attempt) in enumerate(zip(ids, attempts, strict=True)):
                one = None if results is None else [results[at]]
                recorded |= await self._record_acks([row_id], [attempt], one)
            return recorded
        return {row_id for row_id in ids if row_id not in lost}

    def _statement(
        self,
        store: Store,
        ids: Sequence[str],
        attempts: Sequence[int],
        results: Sequence[str | None] | None,
    ) -> Awaitable[set[str]]:
        """The plain ``ack``, or ``ack_results`` when some ack of the batch carries a result or
        is a workflow step's, on ``store`` (the pool's, or the connection of a recovery)."""
        if results is None:
            return store.ack(ids, attempts)
        return store.ack_results(ids, attempts, results, self._results_channel)

    async def reschedule(
        self,
        row_id: str,
        attempts: int,
        *,
        next_attempts: int,
        deferrals: int,
        priority: int,
        delay: float,
        ttl: float | None,
        error: str | None,
        failure: str | None = None,
    ) -> str | None:
        """Record a retry or deferral (``Store.reschedule``); returns the id of the job that
        superseded this one (it took its unique key while it ran: the row ended cancelled
        instead), else ``None``."""
        _, rival = await self._settle(
            row_id,
            self.recovery.landed(
                lambda store: store.reschedule(
                    row_id,
                    attempts,
                    next_attempts=next_attempts,
                    deferrals=deferrals,
                    priority=priority,
                    delay=delay,
                    ttl=ttl,
                    error=error,
                    failure=failure,
                )
            ),
            lambda done: done[0],
        )
        return rival

    async def dead_letter(
        self, row_id: str, attempts: int, reason: str, failure: str | None = None
    ) -> None:
        """Record a dead letter with ``reason`` (``failure``: the attempt error, JSON text)."""
        statement = self.recovery.landed(lambda s: s.dead_letter(row_id, attempts, reason, failure))
        await self._settle(row_id, statement)

    async def finish_cancel(self, row_id: str, attempts: int) -> None:
        """Record the row cancelled: its run, whose cancel was asked for, has ended."""
        statement = self.recovery.landed(lambda s: s.finish_cancel(row_id, attempts))
        await self._settle(row_id, statement)

    async def release(self, row_id: str, attempts: int) -> None:
        """Hand the row back untouched (its run not counted); not kept through an outage (the
        lease hands it back then)."""
        await self._settle(row_id, landed(lambda: self._store.release(row_id, attempts)))

    async def _settle(
        self, row_id: str, settle: Awaitable[R], recorded: Callable[[R], bool] = bool
    ) -> R:
        """Await ``settle``, the row held until it ends; returns what it returned.

        Raises:
            RefusedError: the database refused it for its values.
            BackendError: it could not be recorded.
            LostClaimError: the fence refused it.
        """
        try:
            done = await settle
        except RefusedError:
            raise  # the job's own log fields name it
        except BackendError as exc:
            raise BackendError(f"could not record outcome of job {row_id}: {exc}") from None
        finally:
            self.held.discard(row_id)
        if not recorded(done):
            raise lost_claim(row_id)
        return done

    async def close(self) -> None:
        """Fail the acks and the outcomes still waiting (their rows are redelivered after the
        lease)."""
        await self.recovery.close()
        await self._acks.close()
