"""``PostgresBackend``: rows + LISTEN/NOTIFY + ``FOR UPDATE SKIP LOCKED`` (DESIGN §4).

One table holds both faces of the engine. Publishing inserts rows and ``pg_notify`` in one
statement (one transaction, one round trip; a NOTIFY is delivered at commit). Consumers claim
batches; leases are extended by a heartbeat while the worker lives and reclaimed after
``lease`` when it does not; every settle is fenced by (owner, attempts). All time arithmetic
uses the database's ``now()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from queuey.backends.postgres._acks import AckBatch, LostClaimError
from queuey.backends.postgres._arrays import number_array, text_array
from queuey.backends.postgres._conninfo import connection_errors
from queuey.backends.postgres._consumer import PgConsumer
from queuey.backends.postgres._listen import Listener, Outage
from queuey.backends.postgres._migrate import check_schema, migrate
from queuey.backends.postgres._pool import make_pool
from queuey.backends.postgres._publish import bulk_params, single_params
from queuey.backends.postgres._sql import Statements, check_identifier
from queuey.durations import Duration, parse_duration
from queuey.envelope import Envelope, Kind
from queuey.errors import BackendError, ConfigError, ShutDownError
from queuey.queues import QueueConfig
from queuey.secrets import redact, remember

__all__ = ["PostgresBackend", "process_identity"]

log = logging.getLogger("queuey.postgres")
_SETTLE_ATTEMPTS = 5
_PRUNE_BATCH = 1000


def process_identity() -> str:
    """``host:pid:random``, unique per backend instance, so a restarted process never passes for
    its predecessor."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class PostgresBackend:
    """The PostgreSQL transport. Open it with ``await PostgresBackend.connect(url, ...)`` or
    ``async with PostgresBackend(url, ...)``.

    Args:
        conninfo: a libpq URL or key=value string.
        schema: the schema holding the table (validated identifier; default "queuey").
        table: the message table (default "queue_message").
        channel: the NOTIFY channel (default ``<schema>_queue``, so "queuey_queue" for the
            default schema; a schema's listeners are not woken by another schema's jobs).
            Listeners also listen on ``<schema>_queue``, where operations commands
            (``queuey failed retry``) announce rows they make due.
        poll_interval: the safety-net poll (duration; default 5 s).
        lease: how long a claimed row is held without a heartbeat before another worker may
            take it (duration; default 5 min). The heartbeat extends it every third of it.
        retain: delete done rows older than this (duration; ``None`` keeps them). Failed rows are
            never deleted.
        max_redeliveries: lost leases after which a row ends ``failed`` (default 5).
        pool_size: the connection pool's maximum size (default 10).
        poll_only: no LISTEN connection (for PgBouncer in transaction mode): poll only.

    Raises:
        ConfigError: a bad identifier or duration.
    """

    supports_transactions = True
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
        poll_only: bool = False,
    ) -> None:
        self.conninfo = conninfo
        remember(conninfo)
        self.statements = Statements(schema, table)
        self.schema_channel = f"{schema}_queue"[:63]
        self.channel = check_identifier(channel or self.schema_channel, "channel")
        self.poll_interval = parse_duration(poll_interval, "poll_interval").total_seconds()
        self.lease = parse_duration(lease, "lease").total_seconds()
        self.retain = None if retain is None else parse_duration(retain, "retain").total_seconds()
        self.max_redeliveries = _positive(max_redeliveries, "max_redeliveries")
        _positive(pool_size, "pool_size")
        self.poll_only = poll_only
        self.owner = process_identity()
        self._pool = make_pool(conninfo, pool_size, f"queuey {self.owner}")
        # One pooled connection kept out for publishes one after another: a publish that finds
        # it free skips the pool's checkout and return (a tenth of a single enqueue).
        self._spare: psycopg.AsyncConnection[TupleRow] | None = None
        self._spare_busy = False
        self._acks = AckBatch(self._record_acks)
        self._declared: dict[tuple[Kind, str], QueueConfig] = {}
        self._consumers: dict[str, list[PgConsumer]] = {}
        self._held: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._outage = Outage("PostgreSQL")
        self._state = "new"
        self.listener: Listener | None = None

    def __repr__(self) -> str:
        return f"<PostgresBackend {redact(self.conninfo)} schema={self.statements.schema}>"

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
        with connection_errors(self.conninfo):
            async with await psycopg.AsyncConnection.connect(
                self.conninfo, autocommit=True, connect_timeout=10
            ) as conn:
                await check_schema(conn, self.statements)
            await self._pool.open(wait=False)
        self._state = "open"

    async def __aenter__(self) -> PostgresBackend:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop background tasks and close the pool. Idempotent."""
        if self._state == "closed":
            return
        self._state = "closed"
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await self._acks.close()
        spare, self._spare = self._spare, None
        if spare is not None:
            await self._pool.putconn(spare)
        await self._pool.close()

    def _check_open(self) -> None:
        if self._state != "open":
            raise ShutDownError(f"PostgresBackend is {self._state}; open it first")

    # -- publishing ----------------------------------------------------------------------------

    async def declare(self, queues: Sequence[QueueConfig]) -> None:
        """Remember the queues' options (PostgreSQL needs no objects per queue)."""
        self._check_open()
        for config in queues:
            self._declared.setdefault((config.kind, config.name), config)

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
        """Insert the envelopes' rows and notify, in one statement: all or nothing.

        Args:
            envelopes: the envelopes.
            delay: due after this long (database clock); ``None`` = now.
            connection: the caller's psycopg ``AsyncConnection``; the rows then commit or roll
                back with the caller's transaction (and the NOTIFY is sent at its commit).

        Raises:
            BackendError: nothing was written.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        if not envelopes:
            return
        seconds = 0.0 if delay is None else delay.total_seconds()
        if len(envelopes) == 1:
            name, params = single_params(envelopes[0], seconds, self._ttl, self.channel)
        else:
            name, params = "publish", bulk_params(envelopes, seconds, self._ttl, self.channel)
        with connection_errors(self.conninfo):
            if connection is not None:
                await connection.execute(self.statements[name], params)
                return
            try:
                await self._publish_on_own(self.statements[name], params)
            except psycopg.OperationalError:
                # A restart kills every connection: check them, so the next call gets a live one.
                await self._recheck_pool()
                raise

    async def _publish_on_own(self, statement: sql.Composed, params: dict[str, Any]) -> None:
        """Run a publish on the kept connection when it is free, else on a pooled one."""
        spare = self._spare
        if spare is None or self._spare_busy:
            async with self._pool.connection() as conn:
                await conn.execute(statement, params)
                if self._spare is None and not self._spare_busy:
                    await self._keep_spare()
            return
        self._spare_busy = True
        try:
            await spare.execute(statement, params)
        except BaseException:
            self._spare = None  # maybe broken: back to the pool, which checks it
            await self._pool.putconn(spare)
            raise
        finally:
            self._spare_busy = False

    async def _keep_spare(self) -> None:
        with contextlib.suppress(Exception):
            self._spare = await self._pool.getconn(timeout=0.1)

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Publish ``envelope`` due after ``delay`` at its own (top) priority."""
        await self.publish([envelope], delay)

    # -- consuming -----------------------------------------------------------------------------

    def consumer(self, queue: QueueConfig) -> PgConsumer:
        """A consumer of ``queue``; starts the listener and maintenance on first use."""
        self._check_open()
        self._declared.setdefault((queue.kind, queue.name), queue)
        consumer = PgConsumer(self, queue)
        self._consumers.setdefault(queue.name, []).append(consumer)
        if not self._tasks:
            self._start_background()
        return consumer

    def unregister(self, consumer: PgConsumer) -> None:
        """Forget a stopped consumer."""
        peers = self._consumers.get(consumer.config.name, [])
        if consumer in peers:
            peers.remove(consumer)

    def _start_background(self) -> None:
        self._tasks.append(asyncio.create_task(self._maintain()))
        self._tasks.append(asyncio.create_task(self._heartbeat()))
        if not self.poll_only:
            self.listener = Listener(
                self.conninfo,
                [self.channel, self.schema_channel],
                self._notified,
                self._wake_all,
                f"queuey-listen {self.owner}"[:63],
            )
            self._tasks.append(asyncio.create_task(self.listener.run()))

    def _notified(self, queue: str) -> None:
        for consumer in self._consumers.get(queue, ()):
            consumer.poke()

    def _wake_all(self) -> None:
        for consumers in self._consumers.values():
            for consumer in consumers:
                consumer.poke()

    async def _query(self, name: str, params: dict[str, Any]) -> list[TupleRow] | None:
        """Run a statement through the pool; ``None`` (logged once per outage) when it fails."""
        try:
            async with self._pool.connection(timeout=5) as conn:
                cursor = await conn.execute(self.statements[name], params)
                rows = await cursor.fetchall() if cursor.description else []
        except (psycopg.Error, OSError, TimeoutError) as exc:
            self._outage.failed(exc)
            await self._recheck_pool()
            return None
        if self._outage.down:
            self._outage.recovered()
            self._wake_all()
        return rows

    async def claim(
        self, config: QueueConfig, limit: int
    ) -> list[tuple[str, Envelope, bool]] | None:
        """Claim up to ``limit`` due rows of ``config``'s queue as ``(row id, envelope,
        suspect)``, where ``suspect`` marks a row that already lost a lease (it comes alone).
        ``None`` if the database failed."""
        rows = await self._query(
            "claim",
            {
                "kind": config.kind,
                "queue": config.name,
                "limit": limit,
                "owner": self.owner,
                "lease": self.lease,
                "job_types": _job_types(config),
            },
        )
        if rows is None:
            return None
        rows.sort(key=lambda r: r[9])
        self._held.update(r[0] for r in rows)
        return [(r[0], _envelope(config, r, r[10]), r[10] > 0) for r in rows]

    async def next_due(self, config: QueueConfig) -> float | None:
        """Seconds until the next pending row of the queue is due, if any."""
        rows = await self._query(
            "next_due",
            {
                "kind": config.kind,
                "queue": config.name,
                "job_types": _job_types(config),
            },
        )
        if not rows or rows[0][0] is None:
            return None
        return max(0.0, float(rows[0][0]))

    async def settle(self, name: str, params: dict[str, Any], row_id: str) -> None:
        """Run one fenced settle statement, retrying connection failures.

        Raises:
            LostClaimError: the claim was lost (another worker took the row after the lease).
            BackendError: the database stayed unreachable; the row is then redelivered after its
                lease.
        """
        try:
            rowcount, _ = await self._execute_retrying(name, params)
        except BackendError as exc:
            raise BackendError(f"could not record outcome of job {row_id}: {exc}") from None
        finally:
            self._held.discard(row_id)
        if rowcount == 0:
            raise LostClaimError(
                f"job {row_id}: the claim was lost (its lease expired and the row was "
                "reclaimed); the outcome was not recorded"
            )

    async def ack(self, row_id: str, attempts: int) -> None:
        """Record the success of ``row_id``'s run ``attempts``; acks issued together are
        recorded by one fenced statement (``AckBatch``).

        Raises:
            LostClaimError, BackendError: as for ``settle``.
        """
        try:
            await self._acks.ack(row_id, attempts)
        finally:
            self._held.discard(row_id)

    async def _record_acks(self, ids: Sequence[str], attempts: Sequence[int]) -> set[str]:
        params = {"ids": text_array(ids), "attempts": number_array(attempts), "owner": self.owner}
        _, lost = await self._execute_retrying("ack", params)
        refused = {row[0] for row in lost}
        return {row_id for row_id in ids if row_id not in refused}

    async def _execute_retrying(
        self, name: str, params: dict[str, Any]
    ) -> tuple[int, list[TupleRow]]:
        """Run a statement that must land, retrying lost connections with backoff (0.2 s,
        doubling, 5 attempts); returns (rowcount, rows).

        Raises:
            BackendError: the database stayed unreachable, or refused the statement.
        """
        for attempt in range(_SETTLE_ATTEMPTS):
            try:
                async with self._pool.connection(timeout=5) as conn:
                    cursor = await conn.execute(self.statements[name], params)
                    rows = await cursor.fetchall() if cursor.description else []
                    return cursor.rowcount, rows
            except (psycopg.OperationalError, OSError, TimeoutError) as exc:
                if attempt == _SETTLE_ATTEMPTS - 1:
                    raise BackendError(redact(str(exc))) from None
                await self._recheck_pool()
                await asyncio.sleep(0.2 * 2**attempt)
            except psycopg.Error as exc:
                raise BackendError(redact(str(exc))) from None
        raise AssertionError("unreachable")

    async def _recheck_pool(self) -> None:
        """After a failure on a pooled connection, drop every idle connection that is broken
        too (a database restart kills them all), so a retry gets a live one."""
        with contextlib.suppress(Exception):
            await self._pool.check()

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            if self._held:
                await self._query(
                    "extend",
                    {
                        "ids": list(self._held),
                        "owner": self.owner,
                        "lease": self.lease,
                    },
                )

    async def _maintain(self) -> None:
        while True:
            await self.sweep()
            await asyncio.sleep(self.poll_interval)
            self._wake_all()

    async def sweep(self) -> None:
        """Reclaim expired leases, dead-letter expired messages, prune done rows."""
        reclaimed = await self._query("reclaim", {"max_redeliveries": self.max_redeliveries})
        if reclaimed:
            failed = sum(1 for _, status in reclaimed if status == "failed")
            log.warning(
                "reclaimed %d row(s) whose worker was lost (%d now failed)", len(reclaimed), failed
            )
            self._wake_all()
        await self._query("expire", {})
        if self.retain is not None and self.retain > 0:
            await self.prune()

    async def prune(self) -> int:
        """Delete done rows older than ``retain`` in batches of 1000; returns the count."""
        total = 0
        while self.retain:
            rows = await self._count("prune", {"retain": self.retain, "limit": _PRUNE_BATCH})
            total += rows
            if rows < _PRUNE_BATCH:
                break
        return total

    async def _count(self, name: str, params: dict[str, Any]) -> int:
        try:
            async with self._pool.connection(timeout=5) as conn:
                cursor = await conn.execute(self.statements[name], params)
                return cursor.rowcount
        except (psycopg.Error, OSError, TimeoutError) as exc:
            self._outage.failed(exc)
            return 0

    # -- inspection ----------------------------------------------------------------------------

    async def count_pending(self, queue: str, kind: Kind = "job") -> int:
        """Rows of ``queue`` due now and not claimed.

        Raises:
            BackendError: the database failed.
        """
        rows = await self._fetch("count_pending", {"kind": kind, "queue": queue})
        return int(rows[0][0])

    async def list_dead(
        self, queue: str, kind: Kind = "job", limit: int = 100
    ) -> list[tuple[Envelope, str]]:
        """Failed rows of ``queue``, oldest first, as ``(envelope, reason)``.

        Raises:
            BackendError: the database failed.
        """
        rows = await self._fetch("list_dead", {"kind": kind, "queue": queue, "limit": limit})
        config = QueueConfig(queue, kind=kind)
        return [(_envelope(config, (*r[:9], None, None)), r[9] or "") for r in rows]

    async def purge(self, queues: Sequence[str]) -> int:
        """Delete every row of the given typed queues; returns the count."""
        self._check_open()
        with connection_errors(self.conninfo):
            async with self._pool.connection() as conn:
                cursor = await conn.execute(self.statements["purge"], {"queues": list(queues)})
                return cursor.rowcount

    async def _fetch(self, name: str, params: dict[str, Any]) -> list[TupleRow]:
        self._check_open()
        with connection_errors(self.conninfo):
            async with self._pool.connection() as conn:
                cursor = await conn.execute(self.statements[name], params)
                return await cursor.fetchall()


def _positive(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{what}: must be an integer >= 1, got {value!r}")
    return value


def _job_types(config: QueueConfig) -> list[str] | None:
    return None if config.job_types is None else list(config.job_types)


async def _migrate(conninfo: str, statements: Statements) -> None:
    await migrate(conninfo, schema=statements.schema, table=statements.table)


def _envelope(config: QueueConfig, row: Sequence[Any], redeliveries: int = 0) -> Envelope:
    row_id, job_type, attempts, deferrals, priority, payload, raw, published_by, ms = row[:9]
    # json text from a claim (NULL when empty), already decoded from other queries
    headers = dict(raw) if isinstance(raw, dict) else json.loads(raw) if raw else {}
    if published_by:
        headers["published_by"] = published_by
    return Envelope(
        job_id=row_id,
        job_type=job_type,
        queue=config.name,
        attempt=max(attempts, 1),
        enqueued_at_ms=ms,
        deferrals=deferrals,
        priority=priority,
        payload=payload,
        headers=headers,
        kind=config.kind,
        redeliveries=redeliveries,
    )
