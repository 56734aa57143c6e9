"""The PostgreSQL backend (the default transport): ``PostgresBackend``, ``migrate``,
``Admin`` for operations (status, failed rows, cancel), ``SyncPostgresBackend`` for
``queuey.sync.Producer``, and ``PgDashboardStore``, the dashboard's store."""

from queuey.backends.postgres._admin import (
    Admin,
    FailedRow,
    Held,
    QueueStatus,
    RowDetail,
    Stopped,
    Touched,
)
from queuey.backends.postgres._backend import PostgresBackend, process_identity
from queuey.backends.postgres._dashboard import PgDashboardStore
from queuey.backends.postgres._migrate import LATEST_VERSION, migrate
from queuey.backends.postgres._sync_backend import SyncPostgresBackend
from queuey.secrets import redact

__all__ = [
    "LATEST_VERSION",
    "Admin",
    "FailedRow",
    "Held",
    "PgDashboardStore",
    "PostgresBackend",
    "QueueStatus",
    "RowDetail",
    "Stopped",
    "SyncPostgresBackend",
    "Touched",
    "migrate",
    "process_identity",
    "redact",
]
