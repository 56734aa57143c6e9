"""Acks coalesced into one fenced statement.

A worker acks each delivery as its handler returns; with many jobs in flight those acks arrive
within a few event-loop iterations. ``AckBatch`` gathers them while they keep coming (until an
iteration brings none, for at most ``GATHER_SECS``) and while the previous statement is on the
wire, and records them all with one ``ack`` statement (``UPDATE … FROM unnest(ids,
attempts)``). Fencing is per row, exactly as for a single ack: a row is done only while this
owner holds the attempt it ran. The statement returns the ids it recorded, and only the
deliveries whose fence failed are told their claim was lost; a statement that fails outright
fails every ack of its batch (each row is then redelivered after its lease, never lost).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from queuey.errors import BackendError

__all__ = ["GATHER_SECS", "MAX_BATCH", "AckBatch", "LostClaimError", "lost_claim"]

MAX_BATCH = 1000
"""Acks recorded by one statement, at most."""

GATHER_SECS = 0.002
"""How long a batch may wait for more acks while they keep arriving (seconds)."""

Record = Callable[[Sequence[str], Sequence[int]], Awaitable[set[str]]]
"""Runs the fenced statement for (ids, attempts) and returns the ids it recorded."""

RecordResults = Callable[[Sequence[str], Sequence[int], Sequence[str | None]], Awaitable[set[str]]]
"""As ``Record``, each row with its result (JSON text, ``None`` for none) written by the same
statement: for a batch in which some ack carries a result or is a workflow step's (that
statement also releases the steps waiting on the rows)."""


class LostClaimError(BackendError):
    """The row was reclaimed after its lease expired; this outcome was not recorded."""


def lost_claim(row_id: str) -> LostClaimError:
    """The error of an outcome of ``row_id`` that its fence refused."""
    return LostClaimError(
        f"job {row_id}: the claim was lost (its lease expired and the row was "
        "reclaimed); the outcome was not recorded"
    )


class AckBatch:
    """Coalesces acks into fenced batch statements run by ``record``, one statement at a time."""

    def __init__(self, record: Record, record_results: RecordResults | None = None) -> None:
        self._record = record
        self._record_results = record_results
        self._pending: list[tuple[str, int, asyncio.Future[bool], str | None, bool]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def ack(
        self, row_id: str, attempts: int, result: str | None = None, feeds: bool = False
    ) -> None:
        """Record the success of ``row_id``'s run number ``attempts``, with ``result`` (JSON
        text) written by the same fenced statement when given; ``feeds``: the row is a workflow
        step, whose success may release the steps after it (recorded as a result is).

        Raises:
            LostClaimError: the fence failed (the row was reclaimed and claimed again).
            BackendError: the statement failed; the row will be redelivered after its lease.
        """
        if not await self.submit(row_id, attempts, result, feeds):
            raise lost_claim(row_id)

    def submit(
        self, row_id: str, attempts: int, result: str | None = None, feeds: bool = False
    ) -> asyncio.Future[bool]:
        """``ack`` without its coroutine: the future is true once the ack is recorded, false
        when the fence failed; it fails with ``BackendError`` when the statement failed."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append((row_id, attempts, future, result, feeds))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return future

    async def _gather(self) -> None:
        """Wait while acks keep arriving: one loop iteration at a time, until one brings none,
        the batch is full, or ``GATHER_SECS`` have passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GATHER_SECS
        seen = -1
        while seen != len(self._pending) < MAX_BATCH and loop.time() < deadline:
            seen = len(self._pending)
            await asyncio.sleep(0)

    async def _flush(self) -> None:
        while self._pending:
            await self._gather()
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                ids, attempts = [b[0] for b in batch], [b[1] for b in batch]
                feeding = any(b[3] is not None or b[4] for b in batch)
                if self._record_results is not None and feeding:
                    results = [b[3] for b in batch]
                    recorded = await self._record_results(ids, attempts, results)
                else:
                    recorded = await self._record(ids, attempts)
            except asyncio.CancelledError:
                self._pending = batch + self._pending
                raise
            except BackendError as exc:
                for row_id, _, future, _, _ in batch:
                    if not future.done():
                        future.set_exception(
                            BackendError(f"could not record outcome of job {row_id}: {exc}")
                        )
                continue
            for row_id, _, future, _, _ in batch:
                if not future.done():
                    future.set_result(row_id in recorded)

    async def close(self) -> None:
        """Stop flushing; acks still waiting fail with ``BackendError`` (redelivered later)."""
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        pending, self._pending = self._pending, []
        for row_id, _, future, _, _ in pending:
            if not future.done():
                future.set_exception(
                    BackendError(f"job {row_id}: the backend closed before its ack was recorded")
                )
