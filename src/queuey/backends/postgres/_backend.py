"""``PostgresBackend``: rows + LISTEN/NOTIFY + ``FOR UPDATE SKIP LOCKED``.

One table holds both faces of the engine. Publishing inserts rows and ``pg_notify`` in one
statement (one transaction, one round trip; a NOTIFY is delivered at commit). Consumers claim
batches; leases are extended by a heartbeat while the worker lives and reclaimed after
``lease`` when it does not; every settle is fenced by (owner, attempts). All time arithmetic
uses the database's ``now()``.

The backend is an assembly, in the manner of River's driver: the store (``_store.py``) runs
every statement, the completer (``_complete.py``) settles, maintenance (``_maintenance.py``)
beats and sweeps, the listener (``_listen.py``) wakes consumers (``_consumer.py``) through the
waker (``_wake.py``). None of them knows the backend."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import psycopg

from queuey._validation import check_bool, check_int
from queuey.backends._runs import OpenRuns
from queuey.backends._unclosed import LoopGuard
from queuey.backends.base import CancelResult, JobEnd, JobInfo, QueueDepth
from queuey.backends.postgres._admin import parse_id
from queuey.backends.postgres._awaiters import Awaiters
from queuey.backends.postgres._batch_consumer import BatchingConsumer
from queuey.backends.postgres._batches import BatchMethods
from queuey.backends.postgres._cancel import Cancellations, cancel_channel, cancel_result
from queuey.backends.postgres._complete import Completer
from queuey.backends.postgres._consumer import ConsumerLinks
from queuey.backends.postgres._flow import record_declared
from queuey.backends.postgres._listen import Listener
from queuey.backends.postgres._maintenance import Maintenance, MaintenanceOptions
from queuey.backends.postgres._migrate import migrate
from queuey.backends.postgres._outage import Outage
from queuey.backends.postgres._pool import Pool
from queuey.backends.postgres._publish import (
    bulk_params,
    copy_rows,
    fold,
    once_params,
    single_params,
    unique_params,
    unique_results,
)
from queuey.backends.postgres._recovery import Recovery
from queuey.backends.postgres._sql import Statements, check_identifier
from queuey.backends.postgres._steps import workflow_params
from queuey.backends.postgres._store import Store
from queuey.backends.postgres._wake import Waker
from queuey.backends.postgres._workflow_ops import WorkflowOpsMixin
from queuey.backends.steps import StepEdge, StepRow
from queuey.durations import Duration, parse_duration
from queuey.envelope import Envelope, Kind
from queuey.errors import ShutDownError
from queuey.limits import Throttled
from queuey.queues import QueueConfig
from queuey.schedule import ScheduleRecord
from queuey.secrets import redact
from queuey.unique import EnqueueResult, FirstPublication, IdempotencyKey, State, UniqueKey

__all__ = ["PostgresBackend", "process_identity"]


def process_identity() -> str:
    """``host:pid:random``, unique per backend instance, so a restarted process never passes for
    its predecessor."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class PostgresBackend(WorkflowOpsMixin, BatchMethods):
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

    # -- publishing ----------------------------------------------------------------------------

    async def declare(self, queues: Sequence[QueueConfig]) -> None:
        """Remember the queues' options; record their flow limits for the dashboard."""
        self._check_open()
        for config in queues:
            self._declared.setdefault((config.kind, config.name), config)
        await record_declared(self._store, queues)

    def _ttl(self, kind: Kind, queue: str) -> float | None:
        config = self._declared.get((kind, queue))
        if config is None or config.message_ttl is None:
            return None
        return config.message_ttl.total_seconds()

    async def publish(
        self,
        envelopes: Sequence[Envelope],
        delay: timedelta | None = None,
        *,
        connection: Any = None,
    ) -> None:
        """Insert the envelopes' rows and notify, in one transaction: all or nothing (several
        rows due now go through ``COPY``).

        Args:
            envelopes: the envelopes.
            delay: due after this long (database clock); ``None`` = now.
            connection: the caller's psycopg ``AsyncConnection``; the rows then commit or roll
                back with the caller's transaction (and the NOTIFY is sent at its commit).

        Raises:
            TypeError: ``connection`` is not a psycopg ``AsyncConnection`` (a synchronous
                ``psycopg.Connection`` cannot be awaited); nothing was written.
            BackendUnavailableError: no connection within ``publish_timeout`` (the database
                is unreachable; nothing was written), or no answer within it (the rows may
                or may not have been written).
            BackendError: nothing was written.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        if connection is not None:
            _check_connection(connection)
        if not envelopes:
            return
        seconds = 0.0 if delay is None else delay.total_seconds()
        if len(envelopes) == 1:
            query, params = single_params(envelopes[0], seconds, self._ttl, self.channel)
            await self._store.publish(query, params, connection)
        elif (rows := copy_rows(envelopes, seconds, self._ttl)) is not None:
            await self._store.publish_copy(*rows, self.channel, connection, len(envelopes))
        else:
            params = bulk_params(envelopes, seconds, self._ttl, self.channel)
            await self._store.publish("publish", params, connection, len(envelopes))

    async def start_workflow(
        self, workflow_id: str, steps: Sequence[StepRow], edges: Sequence[StepEdge]
    ) -> None:
        """Insert a workflow's steps (roots pending, the others waiting) and edges in one
        statement (``WorkflowBackend``); all or nothing.

        Raises:
            BackendError: nothing was written.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        params = workflow_params(workflow_id, steps, edges, self.channel)
        await self._store.publish("start_workflow", params)

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Publish ``envelope`` due after ``delay`` at its own (top) priority."""
        await self.publish([envelope], delay)

    async def publish_unique(
        self,
        envelopes: Sequence[Envelope],
        keys: Sequence[UniqueKey | None],
        delay: timedelta | None = None,
        *,
        connection: Any = None,
    ) -> list[EnqueueResult]:
        """Insert the envelopes' rows unless a row in a refused state holds their unique key,
        in one ``INSERT … ON CONFLICT`` statement (all or nothing; see ``UniqueBackend``).

        Args:
            envelopes: the envelopes.
            keys: each envelope's unique key, or ``None``.
            delay: due after this long (database clock); ``None`` = now.
            connection: the caller's psycopg ``AsyncConnection`` (its transaction).

        Returns:
            One result per envelope, in order.

        Raises:
            BackendError: nothing was written (``BackendUnavailableError`` when no connection
                came within ``publish_timeout``).
            ShutDownError: the backend is not open.
        """
        self._check_open()
        if not envelopes:
            return []
        sent, sent_keys, where = fold(envelopes, keys)
        seconds = 0.0 if delay is None else delay.total_seconds()
        params = unique_params(sent, sent_keys, seconds, self._ttl, self.channel)
        rows = await self._store.publish_unique(params, connection, len(envelopes))
        return unique_results(rows, where, keys)

    async def publish_once(
        self,
        envelopes: Sequence[Envelope],
        idempotency: IdempotencyKey,
        *,
        connection: Any = None,
    ) -> FirstPublication:
        """Insert the envelopes' rows unless ``idempotency.key`` was used within its window
        (one statement); the key's first publication either way.

        Raises:
            BackendError: nothing was written (``BackendUnavailableError`` when no connection
                came within ``publish_timeout``).
            ShutDownError: the backend is not open.
        """
        self._check_open()
        params = once_params(envelopes, idempotency, self._ttl, self.channel)
        first = await self._store.publish_once(params, connection, len(envelopes))
        return FirstPublication(tuple(first.ids), first.fingerprint, first.fresh)

    # -- schedules -----------------------------------------------------------------------------

    async def clock(self) -> datetime:
        """The database's ``now()``.

        Raises:
            BackendError: the database failed.
        """
        self._check_open()
        return await self._store.clock()

    async def job_state(self, job_id: str) -> State | None:
        """The status of job ``job_id``; ``None`` when there is no such row (any more)."""
        self._check_open()
        return cast("State | None", await self._store.job_state(job_id))

    async def register_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        """Create or update the schedules (their last slot and paused flag are kept)."""
        self._check_open()
        if records:
            await self._store.register_schedules(records)

    async def list_schedules(self, names: Sequence[str] | None = None) -> list[ScheduleRecord]:
        """The known schedules (of ``names`` only, when given), by name."""
        self._check_open()
        return await self._store.list_schedules(names)

    async def record_fired(self, name: str, slot: datetime, job_id: str) -> None:
        """Record that ``slot`` of ``name`` fired as ``job_id`` (the last slot only moves
        forward)."""
        self._check_open()
        await self._store.record_fired(name, slot, job_id)

    async def set_schedule_paused(self, name: str, paused: bool) -> bool:
        """Pause or resume schedule ``name``, for every worker; ``False`` when unknown."""
        self._check_open()
        return await self._store.pause_schedule(name, paused)

    async def cancel(self, job_id: str) -> CancelResult:
        """Cancel job ``job_id``: a pending or scheduled row becomes ``cancelled``; a running
        one too, and its worker is told through a NOTIFY on ``cancel_channel`` (its handler is
        cancelled, and every later settle of that run is refused by the fence).

        Raises:
            ConfigError: ``job_id`` is not a UUID.
            BackendError: the database failed; nothing changed.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        was = await self._store.cancel(parse_id(job_id), self.cancel_channel)
        return cancel_result(was)

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

    def throttled(self) -> list[Throttled]:
        """What this backend's claims held back under flow limits (``ThrottleBackend``)."""
        return self._store.flow.tally.snapshot()

    async def queue_depths(self) -> list[QueueDepth]:
        """Every (kind, queue) with live rows, counted in one statement (``ops_status``):
        due, scheduled, running and failed rows and the oldest due row's wait.

        Raises:
            BackendError: the database failed.
        """
        self._check_open()
        return await self._store.ops_status()

    async def count_pending(self, queue: str, kind: Kind = "job") -> int:
        """Rows of ``queue`` due now and not claimed.

        Raises:
            BackendError: the database failed.
        """
        self._check_open()
        return await self._store.count_pending(kind, queue)

    async def list_dead(
        self, queue: str, kind: Kind = "job", limit: int = 100
    ) -> list[tuple[Envelope, str]]:
        """Failed rows of ``queue``, oldest first, as ``(envelope, reason)``.

        Raises:
            BackendError: the database failed.
        """
        self._check_open()
        rows = await self._store.list_dead(kind, queue, limit)
        return [(row.envelope(kind, queue), row.reason) for row in rows]

    async def job(self, job_id: str) -> JobInfo | None:
        """Where job ``job_id`` (the id ``enqueue`` returned) is now: its state, attempts, last
        error and due time (``JobLookup``); ``None`` when there is no such row (never enqueued
        in this schema, or done and deleted after ``retain``).

        Raises:
            ConfigError: ``job_id`` is not a UUID.
            BackendError: the database failed.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        return await self._store.job_info(parse_id(job_id))

    async def wait_end(self, job_id: str, timeout: float | None) -> JobEnd | None:
        """Wait until job ``job_id`` is done, failed or cancelled (``ResultBackend``): at once
        when it is already, else when its end is announced on ``results_channel`` to this
        backend's one LISTEN connection (shared by every waiter; ``poll_only``: read again
        every ``poll_interval``). ``None`` after ``timeout`` seconds; the job is left alone.

        Raises:
            UnknownJobError: there is no such row (never enqueued in this schema, or done and
                deleted after ``retain``).
            ConfigError: ``job_id`` is not a UUID.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        return await self._awaiters.wait(parse_id(job_id), timeout)

    async def _listening(self) -> None:
        """Return once the LISTEN session is established (started here if need be)."""
        self._start_listening()
        if self.listener is not None:
            await self.listener.connected.wait()

    async def purge(self, queues: Sequence[str]) -> int:
        """Delete every row of the given typed queues; returns the count."""
        self._check_open()
        return await self._store.purge(queues)


def _check_connection(connection: object) -> None:
    """Refuse a ``connection=`` the backend cannot run its insert on, saying what it takes.

    Raises:
        TypeError: ``connection`` is not a psycopg ``AsyncConnection``.
    """
    if isinstance(connection, psycopg.AsyncConnection):
        return
    kind = f"{type(connection).__module__}.{type(connection).__qualname__}"
    hint = (
        ", a synchronous connection: enqueue through `queuey.sync.Producer` on "
        "`queuey.sync.PostgresBackend`, which takes it, or open an AsyncConnection with "
        "`await psycopg.AsyncConnection.connect(url)`"
        if isinstance(connection, psycopg.Connection)
        else ""
    )
    raise TypeError(
        f"connection= takes the psycopg AsyncConnection whose transaction the job joins; "
        f"got {kind}{hint}"
    )


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
