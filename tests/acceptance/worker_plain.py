"""``queuey worker tests.acceptance.worker_plain:worker``: the plain module-level form on
PostgreSQL, a backend constructed (not opened) at import, as the README shows it."""

from __future__ import annotations

import os

from queuey import Worker
from queuey.backends.postgres import PostgresBackend
from tests.acceptance.worker_app import CliQueues, add_handlers

backend = PostgresBackend(os.environ["QUEUEY_DATABASE_URL"], schema=os.environ["QUEUEY_SCHEMA"])
worker = add_handlers(Worker(CliQueues, backend))
