"""``PostgresBackend``: rows + LISTEN/NOTIFY + ``FOR UPDATE SKIP LOCKED``.

One table holds both faces of the engine. Publishing inserts rows and ``pg_notify`` in one
statement (one transaction, one round trip; a NOTIFY is delivered at commit). Consumers claim
batches; leases are extended by a heartbeat while the worker lives and reclaimed after
``lease`` when it does not; every settle is fenced by (owner, attempts). All time arithmetic
uses the database's ``now()``.

The backend is an assembly, in the manner of River's driver: the store (``_store.py``) runs
every statement, the completer (``_complete.py``) settles, maintenance (``_maintenance.py``)
beats and sweeps, the listener (``_listen.py``) wakes consumers (``_consumer.py``) through the
waker (``_wake.py``). None of them knows the backend. This module assembles them and runs the
lifecycle and consuming; the backend's publishing methods are in ``_backend_publish.py``, its
lookups (schedules, cancel, inspection, results) in ``_backend_lookups.py``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from queuey._validation import check_bool, check_int
from queuey.backends._runs import OpenRuns
from queuey.backends._unclosed import LoopGuard
from queuey.backends.postgres._awaiters import Awaiters
from queuey.backends.postgres._backend_lookups import LookupMethods
from queuey.backends.postgres._backend_publish import PublishMethods
from queuey.backends.postgres._batch_consumer import BatchingConsumer
from queuey.backends.postgres._batches import BatchMethods
from queuey.backends.postgres._cancel import Cancellations, cancel_channel
from queuey.backends.postgres._complete import Completer
from queuey.backends.postgres._consumer import ConsumerLinks
from queuey.backends.postgres._listen import Listener
from queuey.backends.postgres._maintenance import Maintenance, MaintenanceOptions
from queuey.backends.postgres._migrate import migrate
from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._pool import Pool
from queuey.backends.postgres._recovery import Recovery
from queuey.backends.postgres._sql import Statements, check_identifier
from queuey.backends.postgres._store import Store
from queuey.backends.postgres._wake import Waker
from queuey.backends.postgres._workflow_ops import WorkflowOpsMixin
from queuey.durations import Duration, parse_duration
from queuey.envelope import Envelope, Kind
from queuey.errors import ShutDownError
from queuey.queues import QueueConfig
from queuey.secrets import redact

__all__ = ["PostgresBackend", "process_identity"]


def process_identity() -> str:
    """``host:pid:random``, unique per backend instance, so a restarted process never passes for
    its predecessor."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class PostgresBackend(PublishMethods, LookupMethods, WorkflowOpsMixin, BatchMethods):
    """The PostgreSQL transport. Open it with ``await PostgresBackend.connect(url, ...)`` or
    ``async with PostgresBackend(url, ...)``.

    Args:
        conninfo: a libpq URL or key=value string.
        schema: the schema holding the table (validated identifier; default "queuey").
        table: the message table (default "queue_message").
        channel: the NOTIFY channel its publishes notify and its consumers listen on, and only
            that one (default ``<schema>_jobs``, so "queuey_jobs" for the default schema: never
            a topic app's ``<prefix>_queue``, so typed jobs never wake a topic app, a schema's
            listeners are not woken by another schema's jobs, nor an app's by another app's
            topics). ``queuey failed retry`` announces the rows it makes due on
            ``<schema>_jobs``; consumers on another channel pick them up at their next poll.
            Cancelled running jobs are announced on ``<schema>_cancel`` (``cancel_channel``),
            ended jobs awaited for their results on ``<schema>_results``
            (``results_channel``); the one LISTEN connection of the backend listens on all
            three.
        poll_interval: the safety-net poll (duration; default 5 s).
        lease: how long a claimed row is held without a heartbeat before another worker may
            take it (duration; default 5 min). The heartbeat extends it every third of it.
        retain: delete done rows older than this (duration; ``None`` keeps them). Failed rows are
            never deleted.
        max_redeliveries: lost leases after which a row ends ``failed`` (default 5).
        pool_size: the connection pool's maximum size (default 10). From 4 up, a quarter of
            it at most is kept aside for claims (one per claim running at once), each set to
            plan the claim once and never JIT-compile it (``plan_cache_mode``,
            ``jit``: PostgreSQL's "Query Planning" settings).
        publish_timeout: how long an enqueue or publish (``enqueue``, ``enqueue_after``,
            ``enqueue_many``, topic ``publish``, the HTTP endpoint's) waits for the database
            (duration; default 5 s): when no connection answers within it, the call raises
            ``BackendUnavailableError`` saying the database is unreachable and for how long it
            was tried (or, when every connection of a full pool stayed busy that long, saying
            so: raise ``pool_size``), and nothing is written. One on the caller's own connection
            (``connection=``) is not bounded by it: that connection, its transaction and its
            own timeouts decide. A statement the database does not answer within it (plus
            1 ms per row beyond the first of a batch, so a large ``enqueue_many`` is not cut
            short) raises ``BackendUnavailableError`` saying the rows may or may not have been
            written (a retry is at-least-once; unique or idempotency keys make it safe), and
            its connection is dropped.
        poll_only: no LISTEN connection (for PgBouncer in transaction mode): poll only. Nothing
            then outlives a transaction on the pool's connections: claims run on plain pooled
            connections, with no session settings of their own, and no statement is prepared
            (psycopg's ``prepare_threshold = None``, its advice for PgBouncer).

    Raises:
        ConfigError: a bad identifier, duration, count or flag (the message names it).
    """

    supports_transactions = takes_job_batches = True  # batches: enqueue_many's JobBatch
    messaging_system = "postgresql"
    max_delay = timedelta(days=3650)  # queuey.durations.MAX_DURATION: any delay queuey takes

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "queuey",
        table: str = "queue_message",
        channel: str | None = None,
        poll_interval: Duration = "5s",
        lease: Duration = "5m",
        retain: Duration | None = "24h",
        max_redeliveries: int = 5,
        pool_size: int = 10,
        publish_timeout: Duration = "5s",
        poll_only: bool = False,
    ) -> None:
        self.conninfo = conninfo
        self.statements = Statements(schema, table)
        self.schema_channel = f"{schema}_jobs"[:63]  # where `queuey failed retry` notifies
        self.channel = check_identifier(channel or self.schema_channel, "channel")
        self.poll_interval = parse_duration(poll_interval, "poll_interval").total_seconds()
        self.lease = parse_duration(lease, "lease").total_seconds()
        self.retain = None if retain is None else parse_duration(retain, "retain").total_seconds()
        self.max_redeliveries = check_int(max_redeliveries, "max_redeliveries", low=1)
        self.poll_only = check_bool(poll_only, "poll_only")
        self.owner = process_identity()
        pool = Pool(
            conninfo,
            check_int(pool_size, "pool_size", low=1),
            f"queuey {self.owner}",
            pooled_server=self.poll_only,  # poll_only: behind a transaction-mode pooler
        )
        self.publish_timeout = parse_duration(publish_timeout, "publish_timeout").total_seconds()
        self._store = Store(
            self.statements,
            conninfo,
            pool,
            owner=self.owner,
            lease=self.lease,
            publish_timeout=self.publish_timeout,
            channel=self.channel,
        )
        self._waker = Waker()
        self._outage = Outage("PostgreSQL", self._waker.wake_all)
        self.results_channel = f"{schema}_results"[:63]
        self.cancel_channel = cancel_channel(schema)
        self._cancellations = Cancellations(self.owner)
        recovery = Recovery(
            self._store,
            self.lease,
            self._outage.part("recording outcomes"),
            self._cancellations.lost,
            self._cancellations.requested,
        )
        self._completer = Completer(self._store, self.results_channel, recovery)
        self._links = ConsumerLinks(
            self._store,
            self._completer,
            self._waker,
            self._outage,
            self.poll_interval,
            self._cancellations,
        )
        options = MaintenanceOptions(
            self.lease, self.poll_interval, self.max_redeliveries, self.retain
        )
        self._maintenance = Maintenance(
            self._store,
            self._completer.held,
            options,
            self._outage,
            self._waker.wake_all,
            self._cancellations.lost,
            self._cancellations.requested,
            recovery,
            progress=self._completer.progress,
        )
        self._awaiters = Awaiters(
            self._store,
            self._listening,
            self._outage.part("reading awaited jobs"),
            self.poll_interval,
        )
        self._declared: dict[tuple[Kind, str], QueueConfig] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._maintaining = False
        self._listens = False
        self._state = "new"
        self._guard = LoopGuard("PostgresBackend", self.close)
        self._open_runs = OpenRuns("PostgresBackend")
        self.listener: Listener | None = None

    def __repr__(self) -> str:
        return f"<PostgresBackend {redact(self.conninfo)} schema={self.statements.schema}>"

    @property
    def _held(self) -> set[str]:
        """The rows this process holds (the heartbeat keeps their leases)."""
        return self._completer.held

    @classmethod
    async def connect(
        cls, conninfo: str, *, migrate: bool = False, **options: Any
    ) -> PostgresBackend:
        """Create and open a backend; with ``migrate=True`` bring the schema up to date first.

        Raises:
            BackendError: the database cannot be reached.
            SchemaError: the schema is older than this version needs (and ``migrate`` is false).
        """
        backend = cls(conninfo, **options)
        if migrate:
            await _migrate(conninfo, backend.statements)
        await backend.open()
        return backend

    async def open(self) -> None:
        """Open the pool and check the schema version.

        Raises:
            BackendError, SchemaError: as for ``connect``.
        """
        if self._state == "closed":
            raise ShutDownError("this PostgresBackend is closed; create a new one")
        if self._state == "open":
            return
        await self._store.open()
        self._state = "open"
        self._guard.start()  # closes the backend at loop shutdown if the program does not

    async def __aenter__(self) -> PostgresBackend:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def keep_open_for(self, runs: Iterable[asyncio.Future[Any]]) -> None:
        """Make ``close`` wait for ``runs`` (``RunKeeper``): until they end, their rows stay
        held and heartbeated, and their outcomes can be recorded."""
        self._open_runs.keep(runs)

    async def close(self) -> None:
        """Wait for the runs given to ``keep_open_for`` (heartbeating their rows), then stop
        background tasks and close the pool. Idempotent.

        A backend still open when its event loop shuts down (``asyncio.run`` returning or
        raising) is closed then, with a ``ResourceWarning`` naming the line that opened it.
        """
        if self._state == "closed":
            return
        await self._open_runs.wait()
        self._state = "closed"
        self._guard.stop()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            await _stopped(task)
        await self._awaiters.close()
        await self._completer.close()
        await self._store.close()

    def _check_open(self) -> None:
        if self._state != "open":
            raise ShutDownError(f"PostgresBackend is {self._state}; open it first")

    # -- consuming -----------------------------------------------------------------------------

    def consumer(self, queue: QueueConfig) -> BatchingConsumer:
        """A consumer of ``queue``; starts the listener and maintenance on first use."""
        self._check_open()
        self._declared.setdefault((queue.kind, queue.name), queue)
        consumer = BatchingConsumer(queue, self._links)
        self._waker.add(queue.name, consumer)
        if not self._maintaining:
            self._maintaining = True
            self._tasks.append(asyncio.create_task(self._maintenance.sweeps()))
            self._tasks.append(asyncio.create_task(self._maintenance.heartbeat()))
            self._start_listening()
        return consumer

    def _start_listening(self) -> None:
        """Start the LISTEN session (unless ``poll_only``) and the awaiters' poll, once: for
        the first consumer or the first caller awaiting a result, whichever comes first."""
        if self._listens:
            return
        self._listens = True
        self._tasks.append(asyncio.create_task(self._awaiters.poll()))
        if not self.poll_only:
            # Exactly the channel this backend's consumers are woken through: never another
            # app's (a topic prefix) or another schema's.
            channels = {
                self.channel: self._waker.notified,
                self.cancel_channel: self._cancellations.notified,
                self.results_channel: self._awaiters.notified,
            }
            self.listener = Listener(
                self._store,
                channels,
                self._on_listening,
                f"queuey-listen {self.owner}"[:63],
                outage=self._outage.part("the LISTEN connection"),
            )
            self._tasks.append(asyncio.create_task(self.listener.run()))

    def _on_listening(self) -> None:
        """The LISTEN session is (re)established: wake every consumer (nothing published while
        it was away waits for the poll), and check at once that the rows held here are still
        ours (a cancel notified while it was away is not missed)."""
        self._waker.wake_all()
        self._awaiters.reconnected()
        check = asyncio.create_task(self._maintenance.beat())
        self._tasks.append(check)  # cancelled by close() if still running
        check.add_done_callback(self._forget_task)

    def _forget_task(self, task: asyncio.Task[None]) -> None:
        """Drop a finished one-off task, so reconnects do not grow the task list."""
        if task in self._tasks:
            self._tasks.remove(task)

    async def claim(
        self, config: QueueConfig, limit: int
    ) -> list[tuple[str, Envelope, bool]] | None:
        """Claim up to ``limit`` due rows of ``config``'s queue outside any consumer, as
        ``(row id, envelope, suspect)``; ``None`` if the database failed. The rows are held
        (their leases extended) until settled or the backend closes."""
        claimed = await self._outage.attempt(self._store.claim(config, limit))
        if claimed is None:
            return None
        claims = claimed.claims
        self._completer.hold(claim.row_id for claim in claims)
        return [(claim.row_id, claim.envelope, claim.suspect) for claim in claims]

    # -- maintenance ---------------------------------------------------------------------------

    async def sweep(self) -> None:
        """Reclaim expired leases, dead-letter expired messages, prune done rows."""
        await self._maintenance.sweep()

    async def prune(self) -> int:
        """Delete done rows older than ``retain`` in batches of 1000; returns the count."""
        return await self._maintenance.prune()

    # -- inspection ----------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether the database answers, as last seen (open, no outage noticed)."""
        return self._state == "open" and not self._outage.down

    async def _listening(self) -> None:
        """Return once the LISTEN session is established (started here if need be)."""
        self._start_listening()
        if self.listener is not None:
            await self.listener.connected.wait()


async def _migrate(conninfo: str, statements: Statements) -> None:
    await migrate(conninfo, schema=statements.schema, table=statements.table)


async def _stopped(task: asyncio.Task[None]) -> None:
    """Wait for cancelled ``task`` to end, cancelling it again while it goes on: a driver may
    swallow a cancellation (psycopg can turn one into a cancelled-query error), which must not
    leave ``close`` waiting on a loop forever."""
    while not task.done():
        await asyncio.wait({task}, timeout=1.0)
        if not task.done():
            task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()
