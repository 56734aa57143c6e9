"""Which connection a synchronous enqueue writes on, and the warning when it silently does not
follow the caller's open Django transaction.

A sync enqueue given no ``connection=`` uses its backend's ``default_connection`` when it has
one (``SyncPostgresBackend(..., default_connection=django.db.connection)``: every enqueue then
commits or rolls back with the thread's Django transaction). With neither, an enqueue made
inside an open ``transaction.atomic()`` block of Django's default database is written at once,
outside the block, and a ``TransactionWarning`` says so (once per call site, as Python's
warning filters show a warning). Django is looked at only when the process has imported it.
"""

from __future__ import annotations

import sys
import warnings

from queuey.errors import TransactionWarning

__all__ = ["connection_for", "in_django_atomic_block"]

_JOIN = (
    "pass connection=django.db.connection, or build the backend with "
    "sync.PostgresBackend(..., default_connection=django.db.connection) so every enqueue "
    "follows the transaction"
)
_ON_COMMIT = (
    "this backend cannot join a database transaction: enqueue in "
    "transaction.on_commit(lambda: producer.enqueue(...)) instead"
)


def in_django_atomic_block() -> bool:
    """Whether this thread is inside an open ``transaction.atomic()`` block of Django's default
    database (``False`` when Django is not imported or not configured)."""
    db = sys.modules.get("django.db")
    if db is None:
        return False
    try:
        return bool(db.connection.in_atomic_block)
    except Exception:  # Django imported but not configured, or no such database
        return False


def connection_for(backend: object, connection: object | None, stacklevel: int = 3) -> object:
    """The connection a sync enqueue on ``backend`` writes on: ``connection`` when given, else
    the backend's ``default_connection`` (``None``: its own); warns (``TransactionWarning``)
    when that leaves an enqueue made in an open Django atomic block outside it."""
    if connection is not None:
        return connection
    default = getattr(backend, "default_connection", None)
    if default is not None:
        return default
    if in_django_atomic_block():
        joins = bool(getattr(backend, "supports_transactions", False))
        warnings.warn(
            "enqueued inside an open transaction.atomic() block without joining it: the job is "
            f"written now and runs even if the block rolls back; {_JOIN if joins else _ON_COMMIT}",
            TransactionWarning,
            stacklevel=stacklevel,
        )
    return None
