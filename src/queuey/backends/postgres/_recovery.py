"""What a worker owes the database after an outage: the leases of the rows it holds, and the
outcomes it could not record while the database was unreachable.

A settle statement (an ack batch, a retry, a deferral, a dead letter) that fails because the
database cannot be reached (``DatabaseUnavailableError``) is not given up at once: it is kept
here, in memory, and its caller waits. A heartbeat that fails the same way leaves its leases
owed. One task then tries to reach the database every ``PROBE_SECS`` on a connection of its own
(the pool may be slow to reconnect: its backoff doubles for as long as the outage lasts), and
on the first that opens it

1. renews the lease of every row this process holds (``extend``), first, so the rows are not
   reclaimed while the outcomes are written (a held row that is no longer this owner's goes to
   ``on_lost``, one whose cancel was asked for to ``on_cancel``, as after a heartbeat), then
2. runs the kept statements on that connection, in the order they were kept. Each is still
   fenced by (owner, attempt): an outcome whose row was reclaimed meanwhile is refused, never
   written over the new owner's state.

So an outage shorter than the lease costs no second run. The bounds: at most ``MAX_KEPT``
statements are kept (one more fails at once); a kept statement waits until the lease of its
row may have expired (the last renewal known to cover every held row, plus ``lease``), then
fails saying so, and its job is redelivered after the lease, as when the worker dies; a
waiter that is cancelled (a shutdown past its grace) drops its statement; ``close`` fails them
all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

from queuey.backends.postgres._errors import DatabaseUnavailableError
from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._store import Store
from queuey.errors import BackendError

__all__ = ["MAX_KEPT", "PROBE_SECS", "Recovery"]

T = TypeVar("T")
Statement = Callable[[Store], Awaitable[T]]
"""A settle statement, run on the store it is given (the pool's, or the recovery connection)."""

log = logging.getLogger("queuey.postgres")

MAX_KEPT = 10_000
"""Settle statements kept at most while the database is unreachable (an ack batch is one)."""

PROBE_SECS = 0.5
"""How often the database is tried while something is owed to it (seconds)."""

CONNECT_SECS = 2
"""libpq's ``connect_timeout`` of a try (whole seconds; libpq takes no less than 2)."""


@dataclass(eq=False)
class _Kept:
    statement: Statement[Any]
    done: asyncio.Future[Any]
    running: bool = field(default=False)


class Recovery:
    """The leases and outcomes owed to the database by one backend.

    Args:
        store: the backend's store (its pool runs the first try; its ``session`` the rest).
        lease: how long a claim or a renewal holds a row (seconds).
        outage: where failures to reach the database are recorded (logged once per outage).
        on_lost: told the held rows a renewal found no longer this owner's, with when the
            renewal was sent (``time.monotonic()``).
        on_cancel: told the held rows a renewal found a cancel asked for.
    """

    def __init__(
        self,
        store: Store,
        lease: float,
        outage: Outage,
        on_lost: Callable[[Collection[str], float], None] = lambda ids, sent: None,
        on_cancel: Callable[[Collection[str]], None] = lambda ids: None,
    ) -> None:
        self.held: set[str] = set()
        self.renewed_at = time.monotonic()
        self._store = store
        self._lease = lease
        self._outage = outage
        self._on_lost = on_lost
        self._on_cancel = on_cancel
        self._kept: deque[_Kept] = deque()
        self._renewal_owed = False
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def owed(self) -> bool:
        """Whether leases or outcomes wait for the database."""
        return self._renewal_owed or bool(self._kept)

    @property
    def kept(self) -> int:
        """Settle statements waiting for the database now."""
        return len(self._kept)

    def renewed(self, at: float) -> None:
        """Every held row's lease was extended by a statement sent at ``at`` (monotonic)."""
        self.renewed_at = max(self.renewed_at, at)

    def renewal_failed(self) -> None:
        """A heartbeat could not reach the database: renew as soon as it is back."""
        self._renewal_owed = True
        self._start()

    async def landed(self, statement: Statement[T]) -> T:
        """Run ``statement`` on the pool; if the database cannot be reached, keep it until it
        can, and return what it returns then.

        Raises:
            DatabaseUnavailableError: the lease may have expired before the database came
                back, or too many statements are kept already, or the backend closed.
            BackendError: the statement failed otherwise (``RefusedError``: for its values).
        """
        try:
            return await statement(self._store)
        except DatabaseUnavailableError as exc:
            if self._closed or len(self._kept) >= MAX_KEPT:
                raise
            return await self._keep(statement, exc)  # type: ignore[no-any-return]

    async def _keep(self, statement: Statement[Any], failure: BackendError) -> Any:
        kept = _Kept(statement, asyncio.get_running_loop().create_future())
        self._kept.append(kept)
        self._start()
        since = time.monotonic()
        try:
            while not kept.done.done():
                left = self.renewed_at + self._lease - time.monotonic()
                if left <= 0 and not kept.running:
                    self._kept.remove(kept)
                    raise self._expired(time.monotonic() - since, failure)
                await asyncio.wait({kept.done}, timeout=left if left > 0 else 0.1)
        except asyncio.CancelledError:
            if kept in self._kept and not kept.running:
                self._kept.remove(kept)
            kept.done.cancel()
            raise
        return kept.done.result()

    def _expired(self, waited: float, failure: BackendError) -> DatabaseUnavailableError:
        return DatabaseUnavailableError(
            f"{failure} (kept {waited:.1f}s for the database to come back, until the job's "
            f"lease of {self._lease:g}s may have expired: it will run again)"
        )

    def _start(self) -> None:
        if not self._closed and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._recover())

    async def _recover(self) -> None:
        """Until nothing is owed and the database answered: reach it, renew, replay; try
        again after ``PROBE_SECS`` when it cannot be reached (so an outage this recorded always
        ends in ``recovered``, even once what was owed has been given up)."""
        failing = False
        while self.owed or failing:
            try:
                async with self._store.session(
                    check_schema=False,
                    connect_timeout=CONNECT_SECS,
                    application_name=f"queuey-recovery {self._store.owner}",
                ) as bound:
                    await self._renew(bound)
                    await self._replay(bound)
            except BackendError as exc:
                if _cancelling():
                    raise asyncio.CancelledError from None
                failing = True
                self._outage.failed(exc)
                await asyncio.sleep(PROBE_SECS)
            else:
                failing = False
                self._outage.recovered()

    async def _renew(self, bound: Store) -> None:
        """Extend the lease of every held row on ``bound``, before anything else."""
        sent = time.monotonic()  # before the snapshot: a run claimed after it is not judged
        held = set(self.held)
        extended = await bound.extend(held) if held else {}
        self._renewal_owed = False
        self.renewed(sent)
        if held - extended.keys():
            self._on_lost(held - extended.keys(), sent)
        cancelled = [row_id for row_id, cancel in extended.items() if cancel]
        if cancelled:
            self._on_cancel(cancelled)

    async def _replay(self, bound: Store) -> None:
        """Run the kept statements on ``bound`` in order, each answering its waiter; one that
        cannot reach the database stays first, for the next try."""
        written = 0
        while self._kept:
            kept = self._kept[0]
            if kept.done.done():  # its waiter gave up
                self._kept.popleft()
                continue
            kept.running = True
            try:
                result = await kept.statement(bound)
            except DatabaseUnavailableError:
                kept.running = False
                raise
            except Exception as exc:
                self._kept.popleft()
                if not kept.done.done():
                    kept.done.set_exception(exc)
                continue
            self._kept.popleft()
            if not kept.done.done():
                kept.done.set_result(result)
            written += 1
        if written:
            log.info("recorded %d outcome statement(s) kept while PostgreSQL was away", written)

    async def close(self) -> None:
        """Stop trying; every kept statement fails (its job is redelivered after the lease)."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        while self._kept:
            kept = self._kept.popleft()
            if not kept.done.done():
                kept.done.set_exception(
                    DatabaseUnavailableError(
                        "the backend closed before the database came back; the outcome was "
                        "not recorded and the job will run again after its lease"
                    )
                )


def _cancelling() -> bool:
    """Whether the running task has a cancellation pending (``Task.cancelling``)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
