"""``--processes N`` of ``queuey worker`` and ``queuey run``: one command on every core.

With ``N`` above 1 the command becomes a supervisor: it starts ``N`` copies of itself (the same
command line, each told by ``QUEUEY_PROCESS_INDEX`` that it is worker process 1..N and runs one
worker), restarts one that dies (logged at WARNING, after a backoff that doubles from
``RESTART_BASE`` up to ``RESTART_MAX`` seconds while the process keeps dying within
``STABLE_AFTER`` seconds of its start), and turns the first SIGINT or SIGTERM into a graceful
shutdown of all of them (each gets SIGTERM and drains as a single worker does; a second signal
is passed on, which forces them). It exits 0 when every process stopped cleanly, else 1.

The workers share nothing but the database or broker, as workers on separate machines do, so
what holds for those holds here: a job a killed process was running comes back after its lease
(PostgreSQL) or its channel's close (RabbitMQ), and is run at least once. Each process runs in
a process group of its own, so a Ctrl-C in a terminal reaches the supervisor only and is passed
on once, as a graceful SIGTERM. A worker process outlives no supervisor: one whose supervisor is
gone (killed with SIGKILL, say, so it could pass nothing on) sees its parent change within
``PARENT_POLL`` seconds and stops gracefully, as on SIGTERM, handing back or finishing its jobs.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, TypeVar

import click

from queuey.cli._root import announce

__all__ = [
    "INDEX_ENV",
    "PARENT_POLL",
    "RESTART_BASE",
    "SUPERVISOR_ENV",
    "RESTART_MAX",
    "STABLE_AFTER",
    "Supervisor",
    "processes_option",
    "supervise",
]

log = logging.getLogger("queuey.cli.processes")

INDEX_ENV = "QUEUEY_PROCESS_INDEX"
"""Set in each worker process a supervisor starts: its number, 1..N."""

SUPERVISOR_ENV = "QUEUEY_SUPERVISOR_PID"
"""Set in each worker process a supervisor starts: the supervisor's process id."""

PARENT_POLL = 0.5
"""How often (seconds) a worker process checks that its supervisor is still its parent."""

RESTART_BASE = 0.5
"""Seconds before the first restart of a process that died."""

RESTART_MAX = 30.0
"""The longest wait before a restart (seconds)."""

STABLE_AFTER = 10.0
"""A process that ran at least this long (seconds) before dying is restarted after
``RESTART_BASE`` again."""

_POLL = 0.1
F = TypeVar("F", bound=Callable[..., Any])


def processes_option(command: F) -> F:
    """The ``--processes`` option (an ``int``, 1 by default) of a long-running command."""
    option = click.option(
        "--processes",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Worker processes to run (a supervisor restarts one that dies and passes "
        "SIGINT/SIGTERM on to all).",
    )
    return option(command)


@dataclass
class _Slot:
    index: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failures: int = 0
    restart_at: float | None = None
    pids: list[int] = field(default_factory=list)


class Supervisor:
    """Runs ``processes`` copies of ``command`` until told to stop.

    Args:
        command: the argument list of one worker process.
        processes: how many to keep running (at least 1).
        env: the environment of the processes (``INDEX_ENV`` is added to it per process).
    """

    def __init__(
        self, command: Sequence[str], processes: int, env: dict[str, str] | None = None
    ) -> None:
        if processes < 1:
            raise ValueError(f"processes must be at least 1, got {processes}")
        self.command = list(command)
        self.slots = [_Slot(index) for index in range(1, processes + 1)]
        self.env = dict(os.environ if env is None else env)
        self.signals: list[int] = []

    def _start(self, slot: _Slot) -> None:
        if self.signals:  # told to stop before this one started
            return
        env = {**self.env, INDEX_ENV: str(slot.index), SUPERVISOR_ENV: str(os.getpid())}
        slot.process = subprocess.Popen(self.command, env=env, process_group=0)
        slot.started = time.monotonic()
        slot.restart_at = None
        slot.pids.append(slot.process.pid)
        log.info("worker process %d started (pid %d)", slot.index, slot.process.pid)

    def _died(self, slot: _Slot, code: int) -> None:
        assert slot.process is not None
        lived = time.monotonic() - slot.started
        slot.failures = 1 if lived >= STABLE_AFTER else slot.failures + 1
        wait = min(RESTART_MAX, RESTART_BASE * 2 ** (slot.failures - 1))
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        log.warning(
            "worker process %d (pid %d) died with %s after %.1fs; restarting in %.1fs",
            slot.index,
            slot.process.pid,
            how,
            lived,
            wait,
        )
        slot.process = None
        slot.restart_at = time.monotonic() + wait

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        self.signals.append(sig)
        name = signal.Signals(sig).name
        if len(self.signals) == 1:
            count = len(self.slots)
            log.warning("received %s: stopping %d worker processes gracefully", name, count)
        else:
            log.warning("received %s again: forcing the worker processes to stop", name)
        for slot in self.slots:
            if slot.process is not None and slot.process.poll() is None:
                slot.process.send_signal(signal.SIGTERM if len(self.signals) == 1 else sig)

    def run(self) -> int:
        """Start the processes and keep them running until SIGINT or SIGTERM, then wait for
        all of them to stop (must run in the main thread: it handles those signals).

        Returns:
            0 when every process stopped with status 0 after the signal, else 1.
        """
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            for slot in self.slots:
                self._start(slot)
            return self._watch()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _watch(self) -> int:
        clean = True
        while True:
            stopping = bool(self.signals)
            running = 0
            for slot in self.slots:
                if slot.process is not None:
                    code = slot.process.poll()
                    if code is None:
                        running += 1
                    elif stopping:
                        clean = clean and code == 0
                        slot.process = None
                    else:
                        self._died(slot, code)
                elif not stopping and slot.restart_at is not None:
                    if time.monotonic() >= slot.restart_at:
                        self._start(slot)
                        running += 1
            if stopping and running == 0:
                return 0 if clean else 1
            time.sleep(_POLL)


def supervise(processes: int, what: str) -> None:
    """Run this command as a supervisor of ``processes`` copies of itself, and exit, when
    ``processes`` is above 1 and this is not already one of those copies; else return (the
    caller runs its one worker). In one of those copies it first starts the watch that stops
    the worker gracefully once the supervisor is gone.

    Args:
        processes: the ``--processes`` value.
        what: the command's name for the start-up line (``"worker"``, ``"run"``).
    """
    if INDEX_ENV in os.environ:
        _follow_supervisor()
        return
    if processes <= 1:
        return
    command = [sys.executable, "-m", "queuey", *sys.argv[1:]]
    announce(f"queuey {what}: supervising {processes} worker processes")
    sys.exit(Supervisor(command, processes).run())


def _follow_supervisor() -> None:
    """In a worker process a supervisor started: stop gracefully when the supervisor is gone."""
    raw = os.environ.get(SUPERVISOR_ENV, "")
    if not raw.isdigit():
        return
    watch = threading.Thread(
        target=_stop_when_orphaned, args=(int(raw),), name="queuey-supervisor-watch", daemon=True
    )
    watch.start()


def _stop_when_orphaned(supervisor: int) -> None:
    """Wait until this process's parent is no longer ``supervisor`` (it died and the process
    was re-parented), then send this process SIGTERM: the worker's graceful shutdown."""
    while os.getppid() == supervisor:
        time.sleep(PARENT_POLL)
    log.warning(
        "supervisor (pid %d) is gone: stopping worker process %s gracefully",
        supervisor,
        os.environ.get(INDEX_ENV, "?"),
    )
    os.kill(os.getpid(), signal.SIGTERM)
