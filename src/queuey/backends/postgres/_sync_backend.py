"""``SyncPostgresBackend``: the publishing half of ``PostgresBackend`` for code with no event
loop (``queuey.sync.Producer``), on psycopg's synchronous pool (``_sync.SyncStore``).

It writes exactly the rows and notifications the async backend writes (the same named
statements, the same parameters from ``_publish.py``), so workers cannot tell the producers
apart. It is thread-safe: each call takes its own pooled connection (or uses the caller's).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any

from queuey._validation import check_int
from queuey.backends.base import CancelResult, JobInfo
from queuey.backends.postgres._backend import process_identity
from queuey.backends.postgres._cancel import cancel_channel, cancel_result
from queuey.backends.postgres._ids import job_id_or_none
from queuey.backends.postgres._publish import (
    bulk_params,
    fold,
    single_params,
    unique_params,
    unique_results,
)
from queuey.backends.postgres._sql import Statements, check_identifier
from queuey.backends.postgres._sync import SyncStore, caller_connection
from queuey.durations import Duration, parse_duration
from queuey.envelope import Envelope, Kind
from queuey.errors import ShutDownError
from queuey.queues import QueueConfig
from queuey.secrets import redact
from queuey.unique import EnqueueResult, UniqueKey

__all__ = ["SyncPostgresBackend"]


class SyncPostgresBackend:
    """Publishes to a queuey table without an event loop. Open it with
    ``SyncPostgresBackend.connect(url, ...)`` or ``with SyncPostgresBackend(url, ...)``.

    Args:
        conninfo: a libpq URL or key=value string.
        schema: the schema holding the table (default "queuey").
        table: the message table (default "queue_message").
        channel: the NOTIFY channel publishes wake workers on (default ``<schema>_jobs``, as
            ``PostgresBackend``'s).
        pool_size: the pool's maximum size (default 4).
        connect_timeout: give up connecting after this many seconds (default 10).
        publish_timeout: how long an enqueue waits for the database (duration; default 5 s),
            as ``PostgresBackend``'s: past it, ``BackendUnavailableError`` says the database
            is unreachable and for how long it was tried, and nothing was written. An enqueue
            on the caller's connection (``connection=``) is not bounded by it.
        default_connection: the connection an enqueue given no ``connection=`` writes on
            (``queuey.sync.Producer``): Django's ``django.db.connection`` makes every enqueue
            commit or roll back with the calling thread's Django transaction (outside an
            ``atomic()`` block Django commits each statement at once, so the job is written
            then). ``None`` (the default): the backend's own pooled connections.

    Raises:
        ConfigError: a bad identifier or count (the message names it).
    """

    supports_transactions = takes_job_batches = True  # batches: enqueue_many's JobBatch
    messaging_system = "postgresql"

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "queuey",
        table: str = "queue_message",
        channel: str | None = None,
        pool_size: int = 4,
        connect_timeout: int = 10,
        publish_timeout: Duration = "5s",
        default_connection: object | None = None,
    ) -> None:
        self.conninfo = conninfo
        self.default_connection = default_connection
        self.statements = Statements(schema, table)
        self.channel = check_identifier(channel or f"{schema}_jobs"[:63], "channel")
        self.cancel_channel = cancel_channel(schema)
        self._store = SyncStore(
            self.statements,
            conninfo,
            pool_size=check_int(pool_size, "pool_size", low=1),
            application_name=f"queuey-sync {process_identity()}",
            connect_timeout=check_int(connect_timeout, "connect_timeout", low=1),
            publish_timeout=parse_duration(publish_timeout, "publish_timeout").total_seconds(),
        )
        self._declared: dict[tuple[Kind, str], QueueConfig] = {}
        self._state = "new"

    def __repr__(self) -> str:
        return f"<SyncPostgresBackend {redact(self.conninfo)} schema={self.statements.schema}>"

    @classmethod
    def connect(cls, conninfo: str, **options: Any) -> SyncPostgresBackend:
        """Create and open a backend (``options`` as for the constructor).

        Raises:
            BackendError: the database cannot be reached.
            SchemaError: the schema is older than this version needs.
        """
        backend = cls(conninfo, **options)
        backend.open()
        return backend

    def open(self) -> None:
        """Open the pool and check the schema version. Idempotent.

        Raises:
            BackendError, SchemaError: as for ``connect``.
            ShutDownError: the backend was closed.
        """
        if self._state == "closed":
            raise ShutDownError("this SyncPostgresBackend is closed; create a new one")
        if self._state == "new":
            self._store.open()
            self._state = "open"

    def close(self) -> None:
        """Close the pool. Idempotent."""
        if self._state != "closed":
            self._state = "closed"
            self._store.close()

    def __enter__(self) -> SyncPostgresBackend:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._state != "open":
            raise ShutDownError(f"SyncPostgresBackend is {self._state}; open it first")

    def declare(self, queues: Sequence[QueueConfig]) -> None:
        """Remember the queues' options (their message TTLs); no I/O.

        Raises:
            ShutDownError: the backend is not open.
        """
        self._check_open()
        for config in queues:
            self._declared.setdefault((config.kind, config.name), config)

    def _ttl(self, kind: Kind, queue: str) -> float | None:
        config = self._declared.get((kind, queue))
        if config is None or config.message_ttl is None:
            return None
        return config.message_ttl.total_seconds()

    def publish(
        self,
        envelopes: Sequence[Envelope],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> None:
        """Insert the envelopes' rows and notify, in one statement: all or nothing.

        Args:
            envelopes: the envelopes.
            delay: due after this long (database clock); ``None`` = now.
            connection: the caller's psycopg ``Connection`` or Django's
                ``django.db.connection``; the rows then commit or roll back with the
                caller's transaction (and the NOTIFY is sent at its commit).

        Raises:
            TypeError: ``connection`` is neither.
            BackendUnavailableError: no connection within ``publish_timeout``; nothing was
                written.
            BackendError: nothing was written.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        conn = None if connection is None else caller_connection(connection)
        if not envelopes:
            return
        seconds = 0.0 if delay is None else delay.total_seconds()
        if len(envelopes) == 1:
            query, params = single_params(envelopes[0], seconds, self._ttl, self.channel)
            self._store.publish(query, params, conn)
        else:
            params = bulk_params(envelopes, seconds, self._ttl, self.channel)
            self._store.publish("publish", params, conn)

    def publish_unique(
        self,
        envelopes: Sequence[Envelope],
        keys: Sequence[UniqueKey | None],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> list[EnqueueResult]:
        """As ``PostgresBackend.publish_unique``, through the same statement
        (``INSERT … ON CONFLICT``, all or nothing); ``connection`` as for ``publish``.

        Returns:
            One result per envelope, in order: its id and ``inserted=True``, or the holder's id
            and ``inserted=False``.

        Raises:
            TypeError, BackendUnavailableError, BackendError, ShutDownError: as for
                ``publish``.
        """
        self._check_open()
        conn = None if connection is None else caller_connection(connection)
        if not envelopes:
            return []
        sent, sent_keys, where = fold(envelopes, keys)
        seconds = 0.0 if delay is None else delay.total_seconds()
        params = unique_params(sent, sent_keys, seconds, self._ttl, self.channel)
        return unique_results(self._store.publish_unique(params, conn), where, keys)

    def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Publish ``envelope`` due after ``delay`` at its own (top) priority.

        Raises:
            BackendError, ShutDownError: as for ``publish``.
        """
        self.publish([envelope], delay)

    def cancel(self, job_id: str) -> CancelResult:
        """As ``PostgresBackend.cancel``.

        Raises:
            BackendError: the database failed; nothing changed.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        found = job_id_or_none(job_id)
        if found is None:
            return "not_found"
        return cancel_result(self._store.cancel(found, self.cancel_channel, self.channel))

    def job(self, job_id: str) -> JobInfo | None:
        """As ``PostgresBackend.job``: where job ``job_id`` is now, ``None`` when there is no
        such row (or the id is not a UUID).

        Raises:
            BackendError: the database failed.
            ShutDownError: the backend is not open.
        """
        self._check_open()
        found = job_id_or_none(job_id)
        return None if found is None else self._store.job_info(found)
