"""``queuey worker tests.acceptance.worker_memory:worker``: the plain module-level form on the
in-memory backend (nothing to connect to), for the command's flags and start-up line."""

from __future__ import annotations

from queuey import MemoryBackend, Worker
from tests.acceptance.worker_app import CliQueues, add_handlers

worker = add_handlers(Worker(CliQueues, MemoryBackend()))
