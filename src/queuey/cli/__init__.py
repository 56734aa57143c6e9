"""The ``queuey`` command line: thin wrappers that parse arguments and call the library.

The root group and the shared helpers are in ``_root``; commands live beside it and are
imported when run (``_lazy`` says which module defines which command): ``_jobs`` (demo, worker,
db migrate), ``_run`` (run), ``_publish`` (publish), ``_serve`` (serve), ``_ops`` (status, failed),
``_jobs_cmd`` (jobs cancel) and ``_jobs_show`` (jobs show), both on the ``jobs`` group of
``_jobs_group``, ``_schedules`` (schedules list|pause|resume), ``workflows`` (workflows
list|show|cancel) and ``_dashboard`` (dashboard). Exit codes: 0 done, 1
nothing found, 2 bad usage, 3 the server cannot be reached. Messages never show a DSN password.
"""

from __future__ import annotations

from queuey.cli._options import AMQP_URL
from queuey.cli._root import (
    EXIT_NOT_FOUND,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    describe_backend,
    main,
    run_until_signal,
    starting,
)

__all__ = [
    "AMQP_URL",
    "EXIT_NOT_FOUND",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "describe_backend",
    "main",
    "run_until_signal",
    "starting",
]
