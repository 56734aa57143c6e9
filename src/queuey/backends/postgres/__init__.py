"""The PostgreSQL backend (the default transport): ``PostgresBackend`` and ``migrate``."""

from queuey.backends.postgres._backend import PostgresBackend, process_identity
from queuey.backends.postgres._conninfo import redact
from queuey.backends.postgres._migrate import LATEST_VERSION, migrate

__all__ = ["LATEST_VERSION", "PostgresBackend", "migrate", "process_identity", "redact"]
