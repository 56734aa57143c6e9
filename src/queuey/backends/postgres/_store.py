"""The store: every statement the PostgreSQL backend runs, one typed method per named query of
``sql/queries.sql``, rows returned as the frozen dataclasses of ``_rows.py``, and one error
policy for all of them (``_errors.database_errors``).

A store runs its statements on the backend's pool (``_pool.Pool``), or, inside ``session()``,
on one dedicated connection (schema check, migrations, LISTEN, operations). It retries and logs
nothing: a failure is a ``BackendError``, after which a pooled store checks its idle
connections (a restart kills them all). Callers decide what a failure means: consumers and
maintenance log it once per outage, settles retry it, publishes and inspections raise it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from operator import attrgetter
from typing import Any, Literal, TypeVar

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import AsyncRowFactory, class_row, scalar_row, tuple_row

from queuey.attempts import MAX_ATTEMPT_ERRORS
from queuey.backends.base import JobInfo
from queuey.backends.postgres._answer import NoAnswerError, answered, no_answer, publish_bound
from queuey.backends.postgres._arrays import text_array
from queuey.backends.postgres._claiming import after_lock
from queuey.backends.postgres._errors import (
    DatabaseUnavailableError,
    KeyTakenError,
    UndefinedTableError,
    database_errors,
    server_of,
)
from queuey.backends.postgres._flow import FlowClaims, limited_claim
from queuey.backends.postgres._pool import Connection, Connections, Lent
from queuey.backends.postgres._rows import (
    Claimed,
    DeadRow,
    EndRow,
    Enqueued,
    FailedRow,
    FirstUse,
    Held,
    QueueStatus,
    Reclaimed,
    RowDetail,
    Touched,
    claim_rows,
    job_info,
    with_errors,
)
from queuey.backends.postgres._settles import SettleStatements
from queuey.backends.postgres._sql import Migration, Statements, latest_version, migrations
from queuey.envelope import Kind
from queuey.errors import SchemaError
from queuey.limits import ThrottleTally
from queuey.queues import QueueConfig
from queuey.schedule import ScheduleRecord
from queuey.secrets import remember

log = logging.getLogger("queuey.postgres")

__all__ = ["BACKGROUND_TIMEOUT", "Params", "PublishQuery", "Store", "schema_error"]

R = TypeVar("R")
Params = dict[str, Any]
PublishQuery = Literal["publish", "publish_one", "publish_job", "start_workflow", "start_batch"]
"""The three statements that insert rows (``_publish.py`` says which fits)."""
UniqueQuery = Literal["publish_unique", "publish_once", "add_to_batch"]
"""The statements that insert rows under a unique or idempotency key and say what they did."""

BACKGROUND_TIMEOUT = 5.0
"""How long the statements of consumers, settles and maintenance wait for a pooled connection
(seconds); publishes wait ``publish_timeout``, inspections as long as the pool's default."""

_IN_CLAIM_ORDER = attrgetter("position")


class Store(SettleStatements):
    """The statements of one queuey table.

    Args:
        statements: the table's composed statements.
        conninfo: a libpq URL or key=value string (its password is remembered for redaction).
        connections: where statements run (the backend's ``Pool``, a session's ``Lent``);
            ``None`` for a store used only through ``session()``.
        owner: this process's identity, with ``attempts`` the fencing token of its claims.
        lease: how long a claim or a heartbeat holds a row (seconds).
        publish_timeout: how long a publish on a connection of the store waits for one
            (seconds; ``None``: the pool's default). A publish on the caller's connection
            runs as that connection does.
        channel: the typed queues' NOTIFY channel, woken when a debounced job ends (its
            successor may run).
    """

    def __init__(
        self,
        statements: Statements,
        conninfo: str,
        connections: Connections | None = None,
        *,
        owner: str = "",
        lease: float = 0.0,
        publish_timeout: float | None = None,
        channel: str = "",
    ) -> None:
        self.statements = statements
        self.channel = channel
        self.owner = owner
        self.lease = lease
        self.publish_timeout = publish_timeout
        self.flow = FlowClaims(ThrottleTally())  # which claim runs; what limits held back
        self._conninfo = conninfo
        remember(conninfo)
        self._connections = connections

    # -- running statements --------------------------------------------------------------------

    def _where(self) -> Connections:
        if self._connections is None:
            raise RuntimeError("this store runs statements only inside session()")
        return self._connections

    async def _answered(self, work: Callable[[Connection], Awaitable[R]], count: int) -> R:
        """``work`` on the publishing connection, answered within the bound of a publish of
        ``count`` rows (``_answer``; a session's own connection is not bounded)."""
        where = self._where()
        loan = where.publishing(self.publish_timeout)
        bound = None if isinstance(where, Lent) else publish_bound(self.publish_timeout, count)
        server = server_of(self._conninfo)
        return await answered(loan, work, bound, lambda waited: no_answer(server, waited))

    async def _run(
        self,
        statement: sql.SQL | sql.Composed,
        params: Params | None,
        rows: AsyncRowFactory[R],
        timeout: float | None = None,
        *,
        claim: bool = False,
        first: sql.SQL | None = None,
    ) -> tuple[list[R], int]:
        """Run one statement; returns its rows (none without a result) and its row count.
        ``claim``: on a connection set for claims (``_claiming``). ``first``: a statement run
        before it, with the same parameters, in one transaction (a limited claim's lock).

        Raises:
            BackendError: as ``database_errors`` maps it.
        """
        where = self._where()
        lend = where.claiming if claim else where.connection
        try:
            with database_errors():
                async with lend(timeout) as conn:
                    if first is None or params is None:
                        return await _statement(conn, statement, params, rows)
                    return await after_lock(conn, first, statement, params, rows)
        except DatabaseUnavailableError:
            await where.recheck()
            raise

    async def _fetch(
        self,
        name: str,
        params: Params | None,
        rows: AsyncRowFactory[R],
        timeout: float | None = None,
    ) -> list[R]:
        """The rows of the named statement."""
        found, _ = await self._run(self.statements[name], params, rows, timeout)
        return found

    async def _count(self, name: str, params: Params | None, timeout: float | None = None) -> int:
        """The row count of the named statement."""
        _, count = await self._run(self.statements[name], params, tuple_row, timeout)
        return count

    @asynccontextmanager
    async def session(
        self,
        *,
        check_schema: bool = True,
        transaction: bool = False,
        connect_timeout: int | None = 10,
        application_name: str | None = None,
    ) -> AsyncIterator[Store]:
        """A store bound to one new connection (autocommit), closed on exit.

        Args:
            check_schema: first refuse a schema older than this queuey needs.
            transaction: run everything in one transaction (committed on a clean exit).
            connect_timeout: give up connecting after this many seconds (``None``: libpq's).
            application_name: the name the session shows in ``pg_stat_activity``.

        Raises:
            BackendError: the connection failed, or a statement did (also the body's).
            SchemaError: the schema is missing or behind.
        """
        options: dict[str, Any] = {"autocommit": True}
        if connect_timeout is not None:
            options["connect_timeout"] = connect_timeout
        if application_name is not None:
            options["application_name"] = application_name[:63]
        with database_errors():
            async with await psycopg.AsyncConnection.connect(self._conninfo, **options) as conn:
                bound = Store(
                    self.statements,
                    self._conninfo,
                    Lent(conn),
                    owner=self.owner,
                    lease=self.lease,
                    channel=self.channel,
                )
                if check_schema:
                    await bound.check_schema()
                if not transaction:
                    yield bound
                    return
                async with conn.transaction():
                    yield bound

    # -- lifecycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Check the schema on a connection of its own, then open the pool (without waiting
        for its connections).

        Raises:
            BackendError: the database cannot be reached.
            SchemaError: the schema is missing or behind.
        """
        async with self.session():
            pass
        with database_errors():
            await self._where().open()

    async def close(self) -> None:
        """Close the pool (a session closes with its block)."""
        if self._connections is not None:
            await self._connections.close()

    # -- publish (publish, publish_one, publish_job) -------------------------------------------

    async def publish(
        self,
        query: PublishQuery,
        params: Params,
        connection: Connection | None = None,
        count: int = 1,
    ) -> None:
        """Insert rows and notify their queues with ``query``, all or nothing: on
        ``connection`` (the caller's transaction) or on a connection of the store, waiting for
        the answer at most the bound of ``count`` rows (``publish_bound``).

        Raises:
            DatabaseUnavailableError: no connection, or no answer within the bound (then the
                rows may or may not have been written).
            BackendError: nothing was written.
        """
        await self._publishing(query, params, connection, None, count)

    async def _publishing(
        self,
        query: PublishQuery | UniqueQuery,
        params: Params,
        connection: Connection | None,
        rows: AsyncRowFactory[R] | None,
        count: int = 1,
    ) -> list[R]:
        """Run a publishing statement on ``connection`` or the publishing connection; its rows
        with ``rows`` (none without)."""
        statement = self.statements[query]
        try:
            with database_errors():
                if connection is not None:
                    return await _execute(connection, statement, params, rows)
                return await self._answered(
                    lambda conn: _execute(conn, statement, params, rows), count
                )
        except NoAnswerError:
            raise  # checking the pool now would wait on the same silence
        except DatabaseUnavailableError:
            await self._where().recheck()
            raise

    async def publish_copy(
        self,
        data: str,
        queues: Sequence[str],
        channel: str,
        connection: Connection | None,
        count: int = 1,
    ) -> None:
        """``publish_copy`` then ``notify_queues``, in one transaction (the caller's, when
        ``connection`` is given): all or nothing, on ``connection`` or the publishing
        connection.

        Args:
            data: the rows in COPY's text format (``copy_rows``).
            queues: the queues to wake.
            channel: the NOTIFY channel.

        Raises:
            BackendError: nothing was written.
        """
        try:
            with database_errors():
                if connection is not None:
                    await self._copy(connection, data, queues, channel)
                    return
                await self._answered(lambda conn: self._copy(conn, data, queues, channel), count)
        except NoAnswerError:
            raise  # checking the pool now would wait on the same silence
        except DatabaseUnavailableError:
            await self._where().recheck()
            raise

    async def _copy(self, conn: Connection, data: str, queues: Sequence[str], channel: str) -> None:
        """The two statements of a COPY publish: in a transaction of their own on an
        autocommit connection outside one, else in the transaction the connection is in (or
        begins: a caller's non-autocommit connection), which they join like any statement."""
        if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
            async with conn.transaction():
                await self._copy(conn, data, queues, channel)
            return
        async with conn.cursor().copy(self.statements["publish_copy"]) as copy:
            await copy.write(data)
        params = {"channel": channel, "queues": text_array(queues)}
        await conn.execute(self.statements["notify_queues"], params)

    async def publish_unique(
        self, params: Params, connection: Connection | None, count: int = 1
    ) -> list[Enqueued]:
        """``publish_unique``: insert rows unless their unique key is held; per row, in order,
        the id written or found and whether it was inserted.

        Raises:
            BackendError: nothing was written.
        """
        rows = class_row(Enqueued)
        return await self._publishing("publish_unique", params, connection, rows, count)

    async def publish_once(
        self, params: Params, connection: Connection | None, count: int = 1
    ) -> FirstUse:
        """``publish_once``: insert rows unless the idempotency key was used within the window;
        the key's first publication either way.

        Raises:
            BackendError: nothing was written.
        """
        first = class_row(FirstUse)
        rows = await self._publishing("publish_once", params, connection, first, count)
        return rows[0]

    # -- claim and settle ----------------------------------------------------------------------

    async def claim(self, config: QueueConfig, limit: int) -> Claimed:
        """``claim``: take up to ``limit`` due rows of ``config``'s queue (of its job types) for
        ``lease`` seconds; returned in claim order (priority, aged when the queue ages
        priorities, due time, insertion). A short
        claim also tells, in the same round trip, when the queue's next row falls due."""
        params: dict[str, Any] = {"kind": config.kind, "queue": config.name, "app": config.app}
        params |= {"limit": limit, "owner": self.owner, "lease": self.lease}
        params["job_types"] = _job_types(config)
        name, extra = self.flow.statement(config)  # claim, claim_aged or claim_limited
        limited, params = name == "claim_limited", params | extra
        first = self.statements["claim_lock"] if limited else None
        rows, _ = await self._run(
            self.statements[name], params, claim_rows(config), BACKGROUND_TIMEOUT,
            claim=True, first=first,
        )  # fmt: skip
        if rows and self.flow.saw(config, rows[0][2], limited):  # limits set at run time
            return await self.claim(config, limit)
        claims = [claim for claim, _, _ in rows if claim is not None]
        claims.sort(key=_IN_CLAIM_ORDER)
        due = rows[0][1] if rows else None
        return Claimed(claims, None if due is None else max(0.0, float(due)))

    async def job_ends(self, ids: Sequence[str]) -> list[EndRow]:
        """``job_ends``: how each of ``ids`` (UUID strings) stands; a missing one has no row."""
        params = {"ids": text_array(ids)}
        return await self._fetch("job_ends", params, class_row(EndRow), BACKGROUND_TIMEOUT)

    async def release(self, row_id: str, attempts: int) -> bool:
        """``release``: hand run ``attempts`` of ``row_id`` back, due now, the run not counted.
        Like every fenced settle, ``False`` when this owner no longer holds that run."""
        landed, _ = await self._back("release", row_id, attempts, {})
        return landed

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
    ) -> tuple[bool, str | None]:
        """``reschedule`` (a retry or deferral): pending again after ``delay`` seconds with these
        counts, expiring ``ttl`` seconds after that, ``error`` kept unless ``None``, ``failure``
        (an attempt error as JSON text) added to the row's errors unless ``None``. Returns
        whether the fence let it land, and the id of the job that superseded this one (the
        row then ended cancelled), else ``None``."""
        changes = {
            "next_attempts": next_attempts,
            "deferrals": deferrals,
            "priority": priority,
            "delay": delay,
            "ttl": ttl,
            "error": error,
            "failure": failure,
            "keep_errors": MAX_ATTEMPT_ERRORS,
        }
        return await self._back("reschedule", row_id, attempts, changes)

    async def dead_letter(
        self, row_id: str, attempts: int, reason: str, failure: str | None = None
    ) -> bool:
        """``dead_letter``: failed for good with ``reason`` (``failure``: as for
        ``reschedule``)."""
        params = {
            "reason": reason,
            "failure": failure,
            "keep_errors": MAX_ATTEMPT_ERRORS,
            "channel": self.channel,
        }
        return await self._fenced("dead_letter", row_id, attempts, params)

    async def finish_cancel(self, row_id: str, attempts: int) -> bool:
        """``finish_cancel``: the run whose cancel was asked for has ended; the row is
        cancelled now (``False``: this owner no longer holds that run)."""
        return await self._fenced("finish_cancel", row_id, attempts, {"channel": self.channel})

    async def claim_state(self, row_id: str, attempts: int) -> tuple[bool, bool]:
        """``claim_state``: whether this owner still holds run ``attempts`` of ``row_id``, and
        whether its cancel was asked for (both false when there is no such row)."""
        params = {"id": row_id, "owner": self.owner, "attempts": attempts}
        rows = await self._fetch("claim_state", params, tuple_row)
        return (bool(rows[0][0]), bool(rows[0][1])) if rows else (False, False)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """A pooled connection inside a transaction, committed on a clean exit and rolled back
        otherwise (a handler's ``ctx.transaction()``).

        Raises:
            BackendError: the connection, the commit or a statement of the body failed.
        """
        with database_errors():
            async with self._where().connection() as conn, conn.transaction():
                yield conn

    async def complete(self, conn: Connection, row_id: str, attempts: int) -> bool:
        """``complete``: record run ``attempts`` of ``row_id`` done on ``conn`` (the handler's
        transaction); ``False`` when the fence refused it (claim lost or job cancelled)."""
        fence = {"id": row_id, "owner": self.owner, "attempts": attempts, "channel": self.channel}
        with database_errors():
            cursor = await conn.execute(self.statements["complete"], fence)
        return cursor.rowcount > 0

    async def cancel(self, row_id: str, channel: str) -> str | None:
        """``cancel``: a pending or running row becomes cancelled (a running one's owner is told
        on ``channel``); returns the status it had, ``None`` when no such row could be."""
        params = {"id": row_id, "channel": channel, "wake_channel": self.channel}
        rows = await self._fetch("cancel", params, scalar_row)
        return str(rows[0]) if rows else None

    async def _back(
        self, name: str, row_id: str, attempts: int, params: Params
    ) -> tuple[bool, str | None]:
        """A fenced statement that puts the row back to pending, where a unique job takes its
        key back or ends superseded (logged at WARNING). Run again when another row took the
        key between the statement's snapshot and its write (it then sees that row)."""
        fence = {"id": row_id, "owner": self.owner, "attempts": attempts}
        for tries in range(1, 4):
            try:
                rows = await self._fetch(name, {**fence, **params}, tuple_row, BACKGROUND_TIMEOUT)
                break
            except KeyTakenError:
                if tries == 3:
                    raise
        if rows and rows[0][1] is not None:
            log.warning(
                "job %s ends cancelled, superseded by job %s, which holds its unique key "
                "(enqueued while it ran): running it again would run the key twice",
                row_id,
                rows[0][1],
                extra={"job_id": row_id},
            )
            return True, str(rows[0][1])
        return bool(rows), None

    async def _fenced(self, name: str, row_id: str, attempts: int, params: Params) -> bool:
        fence = {"id": row_id, "owner": self.owner, "attempts": attempts}
        return await self._count(name, {**fence, **params}, BACKGROUND_TIMEOUT) > 0

    # -- maintenance ---------------------------------------------------------------------------

    async def extend(self, ids: Collection[str]) -> dict[str, bool]:
        """``extend``: push the lease of the rows of ``ids`` this owner still runs; returns
        those, each with whether its cancel was asked for (a missing one is no longer this
        owner's)."""
        params = {"ids": list(ids), "owner": self.owner, "lease": self.lease}
        rows = await self._fetch("extend", params, tuple_row, BACKGROUND_TIMEOUT)
        return {str(row_id): bool(cancel) for row_id, cancel in rows}

    async def extend_progress(
        self, ids: Collection[str], progress: dict[str, str]
    ) -> dict[str, bool]:
        """``extend_progress``: as ``extend``, writing each row's reported progress (JSON
        text) of ``progress`` with its lease."""
        params = {
            "ids": list(ids),
            "owner": self.owner,
            "lease": self.lease,
            "progress_ids": text_array(progress),
            "progress": text_array(progress.values()),
        }
        rows = await self._fetch("extend_progress", params, tuple_row, BACKGROUND_TIMEOUT)
        return {str(row_id): bool(cancel) for row_id, cancel in rows}

    async def reclaim(self, max_redeliveries: int) -> list[Reclaimed]:
        """``reclaim``: rows whose lease expired back to pending (failed once they lost
        ``max_redeliveries`` leases)."""
        params = {"max_redeliveries": max_redeliveries, "channel": self.channel}
        return await self._fetch("reclaim", params, class_row(Reclaimed), BACKGROUND_TIMEOUT)

    async def expire(self) -> int:
        """``expire``: dead-letter pending rows past their message TTL; returns the count."""
        return await self._count("expire", {"channel": self.channel}, BACKGROUND_TIMEOUT)

    async def prune(self, retain: float, limit: int) -> int:
        """``prune``: delete up to ``limit`` done rows older than ``retain`` seconds."""
        return await self._count("prune", {"retain": retain, "limit": limit}, BACKGROUND_TIMEOUT)

    # -- inspection ----------------------------------------------------------------------------

    async def count_pending(self, kind: Kind, queue: str) -> int:
        """``count_pending``: rows of ``queue`` due now and not claimed."""
        params = {"kind": kind, "queue": queue}
        (pending,) = await self._fetch("count_pending", params, scalar_row)
        return int(pending)

    async def list_dead(self, kind: Kind, queue: str, limit: int) -> list[DeadRow]:
        """``list_dead``: up to ``limit`` failed rows of ``queue``, oldest failure first."""
        params = {"kind": kind, "queue": queue, "limit": limit}
        return await self._fetch("list_dead", params, class_row(DeadRow))

    async def purge(self, queues: Sequence[str]) -> int:
        """``purge``: delete every row of the typed ``queues``; returns the count."""
        return await self._count("purge", {"queues": list(queues)})

    # -- schema and migrations (sessions) ------------------------------------------------------

    async def schema_version(self) -> int:
        """``schema_version``: the newest migration applied; 0 when there is none yet."""
        try:
            (version,) = await self._fetch("schema_version", None, scalar_row)
        except UndefinedTableError:
            return 0
        return int(version)

    async def applied_versions(self) -> set[int]:
        """``applied_versions``: every migration applied (empty when there is none yet)."""
        try:
            rows = await self._fetch("applied_versions", None, scalar_row)
        except UndefinedTableError:
            return set()
        return {int(version) for version in rows}

    async def check_schema(self) -> None:
        """Refuse a schema older than this queuey needs: one that lacks any migration of this
        version, also one numbered below the highest applied (added by a later release).

        Raises:
            SchemaError: the schema is missing or behind; the message says to migrate it.
        """
        error = schema_error(self.statements.schema, await self.applied_versions())
        if error is not None:
            raise error

    async def lock_migrations(self) -> None:
        """``migrate_lock``: hold the schema's migration lock until the transaction ends."""
        await self._count("migrate_lock", {"schema": self.statements.schema})

    async def create_bookkeeping(self) -> None:
        """``migrate_bookkeeping``: the schema and its migrations table, when missing."""
        await self._count("migrate_bookkeeping", None)

    async def apply_migration(self, migration: Migration) -> None:
        """Run ``migration`` (its own ``.sql`` file), then ``record_migration``."""
        await self._run(self.statements.migration(migration), None, tuple_row)
        params = {"version": migration.version, "name": migration.name}
        await self._count("record_migration", params)

    # -- schedules ----------------------------------------------------------------------------

    async def clock(self) -> datetime:
        """``clock``: the database's ``now()``."""
        (now,) = await self._fetch("clock", None, scalar_row)
        return now  # type: ignore[no-any-return]

    async def job_state(self, row_id: str) -> str | None:
        """``job_state``: the status of row ``row_id``, ``None`` when there is none."""
        found = await self._fetch("job_state", {"id": row_id}, scalar_row)
        return str(found[0]) if found else None

    async def register_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        """``register_schedules``: create or update these schedules' expression and zone."""
        params = {
            "names": [r.name for r in records],
            "expressions": [r.expression for r in records],
            "zones": [r.tz for r in records],
        }
        await self._count("register_schedules", params)

    async def list_schedules(self, names: Sequence[str] | None) -> list[ScheduleRecord]:
        """``list_schedules``: the known schedules (of ``names``), by name."""
        params = {"names": None if names is None else list(names)}
        return await self._fetch("list_schedules", params, class_row(ScheduleRecord))

    async def record_fired(self, name: str, slot: datetime, job_id: str) -> None:
        """``record_fired``: move schedule ``name``'s last slot forward to ``slot``."""
        await self._count("record_fired", {"name": name, "slot": slot, "job_id": job_id})

    async def pause_schedule(self, name: str, paused: bool) -> bool:
        """``pause_schedule``: set the paused flag; ``False`` when no such schedule."""
        return await self._count("pause_schedule", {"name": name, "paused": paused}) > 0

    async def record_action(self, params: Params) -> None:
        """``record_action``: one audit row (actor, action, kind, queue, job_id, filter,
        count)."""
        await self._count("record_action", params)

    # -- the LISTEN session --------------------------------------------------------------------

    async def listen(self, channels: Sequence[str]) -> None:
        """``listen`` on each of ``channels``."""
        for channel in channels:
            await self._run(self.statements.listen(channel), None, tuple_row)

    async def notifications(self, timeout: float) -> AsyncIterator[tuple[str, str]]:
        """``(channel, payload)`` of each notification the session receives within ``timeout``
        seconds (a session's; its ``database_errors`` maps a failure)."""
        if not isinstance(self._connections, Lent):
            raise RuntimeError("only a session has a connection of its own")
        async for notify in self._connections.conn.notifies(timeout=timeout):
            yield notify.channel, notify.payload

    async def ping(self) -> None:
        """``ping``: one round trip."""
        await self._count("ping", None)

    # -- operations (sessions) -----------------------------------------------------------------

    async def flow_held(self, config: QueueConfig) -> tuple[int, int]:
        """``flow_held``: the due rows of ``config``'s queue its concurrency caps and its rate
        limits hold back now (``config.limits`` must not be empty)."""
        params: dict[str, Any] = {"kind": config.kind, "queue": config.name, "app": config.app}
        params |= {"job_types": _job_types(config), **limited_claim(config.limits)}
        rows = await self._fetch("flow_held", params, tuple_row)
        return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)

    async def ops_status(self) -> list[QueueStatus]:
        """``ops_status``: counts of live rows per (kind, queue)."""
        return await self._fetch("ops_status", {}, class_row(QueueStatus))

    async def ops_failed(
        self, queue: str | None, limit: int | None, status: str = "failed"
    ) -> list[FailedRow]:
        """``ops_failed``: rows of ``status`` (failed or cancelled; of ``queue``), oldest
        first, at most ``limit``."""
        params = {"queue": queue, "limit": limit, "status": status}
        return await self._fetch("ops_failed", params, class_row(FailedRow))

    async def ops_show(self, row_id: str) -> RowDetail | None:
        """``ops_show``: one row by id, whatever its status."""
        rows = await self._fetch("ops_show", {"id": row_id}, class_row(RowDetail))
        return with_errors(rows[0]) if rows else None

    async def job_info(self, job_id: str) -> JobInfo | None:
        """``job_info``: one job by id (a UUID string), whatever its status; due time in UTC."""
        rows = await self._fetch("job_info", {"id": job_id}, class_row(JobInfo))
        return job_info(rows[0]) if rows else None

    async def queue_exists(self, queue: str) -> bool:
        """``queue_exists``: whether any row, of any kind and status, is on ``queue``."""
        (known,) = await self._fetch("queue_exists", {"queue": queue}, scalar_row)
        return bool(known)

    async def ops_retry(
        self, row_id: str | None, queue: str | None, channel: str, status: str = "failed"
    ) -> list[Touched]:
        """``ops_retry``: rows of ``status`` (this one, of this queue) pending again, due now;
        one notification on ``channel`` per queue."""
        params = {"id": row_id, "queue": queue, "channel": channel, "status": status}
        for tries in range(1, 4):
            try:
                return await self._fetch("ops_retry", params, class_row(Touched))
            except KeyTakenError:  # a job took a key between the snapshot and the write
                if tries == 3:
                    raise
        raise AssertionError("unreachable")

    async def ops_held(self, row_id: str | None, queue: str | None, status: str) -> list[Held]:
        """``ops_held``: rows of ``status`` (this one, of this queue) that a retry leaves
        alone because another job holds their unique key."""
        params = {"id": row_id, "queue": queue, "status": status}
        return await self._fetch("ops_held", params, class_row(Held))

    async def ops_discard(
        self, row_id: str | None, queue: str | None, status: str = "failed"
    ) -> list[Touched]:
        """``ops_discard``: delete rows of ``status`` (this one, of this queue)."""
        params = {"id": row_id, "queue": queue, "status": status}
        return await self._fetch("ops_discard", params, class_row(Touched))


def schema_error(schema: str, applied: Collection[int]) -> SchemaError | None:
    """The ``SchemaError`` of a schema with the migrations ``applied``: ``None`` when it has
    every migration of this version, else one saying to migrate it (also when a migration
    numbered below the highest applied is missing: added by a later release)."""
    missing = sorted(m.version for m in migrations() if m.version not in applied)
    if not missing:
        return None
    version, needed = max(applied, default=0), latest_version()
    state = (
        f"is at version {version}, this queuey needs {needed}"
        if version < needed
        else f"lacks migration {', '.join(map(str, missing))}"
    )
    return SchemaError(f"schema {schema!r} {state}: run `queuey db migrate --schema {schema}`")


async def _execute(
    conn: Connection, statement: sql.SQL, params: Params, rows: AsyncRowFactory[R] | None
) -> list[R]:
    """Run ``statement`` on ``conn``; its rows with ``rows`` (nothing when ``None``)."""
    if rows is None:
        await conn.execute(statement, params)
        return []
    cursor = conn.cursor(row_factory=rows)
    await cursor.execute(statement, params)
    return await cursor.fetchall()


async def _statement(
    conn: Connection,
    statement: sql.SQL | sql.Composed,
    params: Params | None,
    rows: AsyncRowFactory[R],
) -> tuple[list[R], int]:
    """Run ``statement`` on ``conn``: its rows (none without a result) and its row count."""
    cursor = conn.cursor(row_factory=rows)
    await cursor.execute(statement, params)
    found = await cursor.fetchall() if cursor.description is not None else []
    return found, cursor.rowcount


def _job_types(config: QueueConfig) -> list[str] | None:
    return None if config.job_types is None else list(config.job_types)
