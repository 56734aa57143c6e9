"""The ``queuey`` command line: thin wrappers that parse arguments and call the library.

One module per command or group, named after it and imported only when that command runs
(``_lazy.COMMANDS``): ``_demo``, ``_worker``, ``_db``, ``_run`` (``run``, ``--http`` included),
``_publish``, ``_serve``, ``_dashboard``, ``_status``, ``_failed``, ``_jobs``, ``_queues``,
``_schedules`` and ``_workflows``. What they share: the root group and its helpers in
``_root``, the options in ``_options``, the app file of the topic commands in ``_app``, the
``Admin`` of the database commands in ``_admin``. Exit codes: 0 done, 1 nothing found, 2 bad
usage, 3 the server cannot be reached. Messages never show a DSN password.
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
