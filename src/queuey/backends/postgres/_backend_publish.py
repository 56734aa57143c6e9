"""The publishing methods of ``PostgresBackend``: ``declare`` (the queues' options a row
takes, its message TTL), ``publish`` (one row, ``COPY`` for many due now, one statement
otherwise), ``start_workflow``, ``defer``, and the inserts under a unique or idempotency key
(``UniqueBackend``). Each builds its statement's parameters (``_publish``) and runs it through
the store; ``PostgresBackend`` inherits them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import psycopg

from queuey.backends.postgres._flow import record_declared
from queuey.backends.postgres._publish import (
    bulk_params,
    copy_rows,
    fold,
    once_params,
    single_params,
    unique_params,
    unique_results,
)
from queuey.backends.postgres._steps import workflow_params
from queuey.backends.postgres._store import Store
from queuey.backends.steps import StepEdge, StepRow
from queuey.envelope import Envelope, Kind
from queuey.queues import QueueConfig
from queuey.unique import EnqueueResult, FirstPublication, IdempotencyKey, UniqueKey

__all__ = ["PublishMethods"]


class PublishMethods:
    """The publishing methods of ``PostgresBackend`` (its store, channel, declared queues and
    open check)."""

    _store: Store
    channel: str
    _declared: dict[tuple[Kind, str], QueueConfig]

    _check_open: Callable[[], None]

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
