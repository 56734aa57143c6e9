"""The PostgreSQL backend (the default transport): ``PostgresBackend``, ``migrate``, and
``Admin`` for operations (status, failed rows)."""

from queuey.backends.postgres._admin import Admin
from queuey.backends.postgres._backend import PostgresBackend, process_identity
from queuey.backends.postgres._migrate import LATEST_VERSION, migrate
from queuey.secrets import redact

__all__ = ["LATEST_VERSION", "Admin", "PostgresBackend", "migrate", "process_identity", "redact"]
