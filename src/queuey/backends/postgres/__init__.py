"""The PostgreSQL backend (the default transport): ``PostgresBackend``, ``migrate``,
``Admin`` for operations (status, failed rows, cancel), and ``SyncPostgresBackend`` for
``queuey.sync.Producer``."""

from queuey.backends.postgres._admin import Admin
from queuey.backends.postgres._backend import PostgresBackend, process_identity
from queuey.backends.postgres._migrate import LATEST_VERSION, migrate
from queuey.backends.postgres._sync_backend import SyncPostgresBackend
from queuey.secrets import redact

__all__ = [
    "LATEST_VERSION",
    "Admin",
    "PostgresBackend",
    "SyncPostgresBackend",
    "migrate",
    "process_identity",
    "redact",
]
