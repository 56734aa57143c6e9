"""The statements that record many outcomes at once, fenced per row: ``ack`` and
``ack_results`` (the acks ``AckBatch`` gathers) and ``settle_batch`` (a batch handler's
outcomes: successes, retries, deferrals and dead letters in one statement). Part of ``Store``
(``Store`` inherits them); run only through it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar

from psycopg.rows import scalar_row

from queuey.attempts import MAX_ATTEMPT_ERRORS
from queuey.backends.postgres._arrays import nullable_text_array, number_array, text_array
from queuey.backends.postgres._statement_runner import StatementRunner
from queuey.backends.steps import fans_out

__all__ = ["BatchRow", "SettleStatements"]

R = TypeVar("R")

BACKGROUND_TIMEOUT = 5.0
"""As ``_store.BACKGROUND_TIMEOUT`` (settles wait this long for a pooled connection)."""

Verdict = Literal["done", "pending", "failed"]

BatchRow = tuple[str, int, Verdict, int, int, int, float, str | None, str | None]
"""One row of ``settle_batch``: id, the attempt it ran, the verdict, then for a retry or
deferral its next attempts, deferrals, priority and delay (seconds), the error (a dead
letter's reason, a retry's error; ``None`` for none) and the failed attempt's ``AttemptError``
(JSON text, ``None`` for none)."""


class SettleStatements:
    """``Store``'s statements that settle many rows (see the module)."""

    async def ack(self: StatementRunner, ids: Sequence[str], attempts: Sequence[int]) -> set[str]:
        """``ack``: record the success of each run (``ids[i]``, ``attempts[i]``) this owner
        holds; returns the ids NOT recorded (their claim was lost)."""
        params = {
            "ids": text_array(ids),
            "attempts": number_array(attempts),
            "owner": self.owner,
            "channel": self.channel,
        }
        return set(await self._fetch("ack", params, scalar_row, BACKGROUND_TIMEOUT))

    async def ack_results(
        self: StatementRunner,
        ids: Sequence[str],
        attempts: Sequence[int],
        results: Sequence[str | None],
        channel: str,
    ) -> set[str]:
        """``ack_results`` (or ``ack_fan_out``): as ``ack``, each row with its result (JSON text)
        written by the same fenced statement and announced on ``channel``; the ids NOT recorded."""
        params = {
            "ids": text_array(ids),
            "attempts": number_array(attempts),
            "results": nullable_text_array(results),
            "owner": self.owner,
            "results_channel": channel,
            "channel": self.channel,
        }
        name = "ack_fan_out" if fans_out(results) else "ack_results"
        return set(await self._fetch(name, params, scalar_row, BACKGROUND_TIMEOUT))

    async def settle_batch(
        self: StatementRunner, rows: Sequence[BatchRow], ttl: float | None
    ) -> set[str]:
        """``settle_batch``: record each row's outcome (``BatchRow``) in one statement, fenced
        per row; ``ttl`` is the queue's message TTL (seconds) for the rows due again. Returns
        the ids recorded (a lost claim, a cancel asked for, a unique job's retry or a workflow
        step's dead letter is not).

        Raises:
            BackendError: the database failed the statement (nothing was recorded).
        """
        columns = list(zip(*rows, strict=True))
        params = {
            "ids": text_array(columns[0]),
            "attempts": number_array(columns[1]),
            "verdicts": text_array(columns[2]),
            "next_attempts": number_array(columns[3]),
            "deferrals": number_array(columns[4]),
            "priorities": number_array(columns[5]),
            "delays": number_array(columns[6]),
            "errors": nullable_text_array(columns[7]),
            "failures": nullable_text_array(columns[8]),
            "ttl": ttl,
            "owner": self.owner,
            "channel": self.channel,
            "keep_errors": MAX_ATTEMPT_ERRORS,
        }
        return set(await self._fetch("settle_batch", params, scalar_row, BACKGROUND_TIMEOUT))
