"""The callers waiting for jobs to end (``PostgresBackend.wait_end``), however many, woken
through the backend's one LISTEN connection.

A job that ends is announced on ``<schema>_results`` with its id: a success of a job with a
result by the fenced ack that writes the result (``ack_results``), a failure or cancellation by
the table's trigger (migration 0005). The fenced ack carries a result of up to 7,000 bytes in
the notification itself (``<id> <result JSON>``), which its waiters get as they are: a success
costs no read back. Any other notification is only a hint: the ids announced that someone here
waits for are read back, many per statement (``job_ends``), and each waiter gets how its job
ended. The same batched read serves a new waiter (it may have ended already: a late
caller reads the stored result at once), every waiter after the LISTEN session reconnects
(what was announced while it was away is not missed) and, every ``poll_interval``, every waiter
still waiting (a job whose success is never announced: one that declares no result type). No
waiter holds a connection or polls on its own.

A new waiter is read only once LISTEN is established, so a job that ends after that read is
always announced to this process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import cast

from queuey.backends._waiters import Waiting, await_end, waiter
from queuey.backends.base import JobEnd, JobState
from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._rows import EndRow
from queuey.backends.postgres._store import Store
from queuey.errors import UnknownJobError

__all__ = ["READ_BATCH", "Awaiters"]

READ_BATCH = 1000
"""Jobs read back by one ``job_ends`` statement, at most."""

TERMINAL = frozenset({"done", "failed", "cancelled"})


class Awaiters:
    """The waiters of one backend, by job id.

    Args:
        store: reads how jobs stand (``job_ends``).
        listening: returns once the LISTEN session is established (starting it if needed).
        outage: where a failed read is recorded (logged once per outage); the read is retried.
        poll_interval: how often every waiter is read again (seconds), whatever was announced.
    """

    def __init__(
        self,
        store: Store,
        listening: Callable[[], Awaitable[None]],
        outage: Outage,
        poll_interval: float,
    ) -> None:
        self._store = store
        self._listening = listening
        self._outage = outage
        self._poll_interval = poll_interval
        self._waiting: Waiting = {}
        self._unread: set[str] = set()
        self._reader: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """How many jobs someone here waits for."""
        return len(self._waiting)

    async def wait(self, job_id: str, timeout: float | None) -> JobEnd | None:
        """How job ``job_id`` (a canonical UUID string) ended, once it has; ``None`` after
        ``timeout`` seconds.

        Raises:
            UnknownJobError: there is no such row.
        """
        future = waiter(self._waiting, job_id)
        self._read([job_id])
        return await await_end(self._waiting, job_id, future, timeout)

    def notified(self, payload: str) -> None:
        """A job ended (``payload``: its id, then a space and its result when ``ack_results``
        carried it): give its waiters the result carried, else read it back, if someone here
        waits for it."""
        job_id, _, result = payload.partition(" ")
        if job_id not in self._waiting:
            return
        if not result:
            self._read([job_id])
            return
        for future in self._waiting[job_id]:
            if not future.done():
                future.set_result(JobEnd("done", None, result))

    def reconnected(self) -> None:
        """The LISTEN session is (re)established: read every waited job back (an end announced
        while it was away is not missed)."""
        self._read(list(self._waiting))

    async def poll(self) -> None:
        """Read every waited job back every ``poll_interval``; until cancelled."""
        while True:
            await asyncio.sleep(self._poll_interval)
            if self._waiting:
                self._read(list(self._waiting))

    def _read(self, ids: Iterable[str]) -> None:
        self._unread.update(ids)
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read_all())

    async def _read_all(self) -> None:
        await self._listening()
        while self._unread:
            await asyncio.sleep(0)  # the ids of one burst of notifications go in one read
            batch = [job_id for job_id in self._unread if job_id in self._waiting][:READ_BATCH]
            self._unread.difference_update(batch)
            self._unread.intersection_update(self._waiting)
            if not batch:
                continue
            rows = await self._outage.attempt(self._store.job_ends(batch))
            if rows is None:  # the database failed: read them again shortly
                self._unread.update(batch)
                await asyncio.sleep(min(1.0, self._poll_interval))
                continue
            self._resolve(batch, rows)

    def _resolve(self, batch: list[str], rows: list[EndRow]) -> None:
        found = {row.id: row for row in rows}
        for job_id in batch:
            row = found.get(job_id)
            if row is not None and row.status not in TERMINAL:
                continue
            for future in self._waiting.get(job_id, ()):
                if future.done():
                    continue
                if row is None:
                    future.set_exception(UnknownJobError(job_id))
                else:
                    state = cast(JobState, row.status)
                    future.set_result(JobEnd(state, row.error, row.result))

    async def close(self) -> None:
        """Stop reading (the waiters still waiting time out)."""
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
