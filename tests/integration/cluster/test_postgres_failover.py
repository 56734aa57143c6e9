"""PostgreSQL failover behind a libpq multi-host URL (``host=a,b`` with
``target_session_attrs=read-write``): a throwaway primary and its standby
(``scripts/pg-standby``), a producer process and two ``queuey worker`` processes on the URL,
the primary stopped at once (``pg_ctl stop -m immediate``) and the standby promoted mid-drain.

Checked from the processes' own records (``failover_app``): the producer and each worker carry
on within 10 s of the promotion; LISTEN is back on the new primary (each worker holds a LISTEN
session there, and a job enqueued after the failover is picked up within 3 s while the workers
poll only every 20 s). With synchronous replication no enqueue that returned is lost and no job
whose success was recorded runs again. With asynchronous replication what is lost is measured
(``QUEUEY_TEST_FAILOVER_TRIALS`` trials, default 1; each trial's figures go to the test's output
and, with ``QUEUEY_TEST_FAILOVER_REPORT=path``, appended to that file as a JSON line), and must
have been acknowledged in the last ``LOSS_WINDOW`` seconds before the primary stopped. A standby
held ``HELD`` seconds behind (its WAL sender stopped, as a slow network would) does lose what
was acknowledged meanwhile, enqueues and completions, and nothing older."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import psycopg
import pytest

from queuey import Producer
from queuey.backends.postgres import PostgresBackend, migrate
from tests.conftest import unavailable
from tests.helpers import ROOT, python_path
from tests.integration.cluster.failover_app import FailoverQueues, Task
from tests.integration.cluster.failover_records import Trial

pytestmark = pytest.mark.cluster

SCRIPT = ROOT / "scripts" / "pg-standby"
CONTINUE_WITHIN = 10.0  # seconds after the promotion
LISTEN_WITHIN = 3.0  # seconds from an enqueue to its pickup, against a 20 s poll
LOSS_WINDOW = 2.0  # seconds before the stop in which a lost acknowledgement may fall
HELD = 1.0  # seconds the WAL sender is held before the crash, in the lagging trial
BACKLOG = 3000
TRIALS = int(os.environ.get("QUEUEY_TEST_FAILOVER_TRIALS", "1"))
REPORT = os.environ.get("QUEUEY_TEST_FAILOVER_REPORT")
WORKER = [sys.executable, "-m", "queuey", "worker", "tests.integration.cluster.failover_app:build"]
PRODUCER = [sys.executable, "-m", "tests.integration.cluster.failover_app", "produce"]


def _pair(*args: str, sync: bool = False) -> str:
    env = {**os.environ, "QUEUEY_PG_SYNC": "1" if sync else "0"}
    done = subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/pg-standby {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _start_pair(sync: bool) -> str:
    """A fresh primary and standby; their multi-host URL."""
    try:
        out = _pair("start", sync=sync)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        with contextlib.suppress(Exception):
            _pair("stop")  # what a half-made pair left
        unavailable("a local PostgreSQL primary and standby (scripts/pg-standby)", exc)
        raise
    line = next(line for line in out.splitlines() if line.startswith("export "))
    return shlex.split(line.removeprefix("export "))[0].split("=", 1)[1]


def _host_url(url: str, index: int) -> str:
    """One host of the multi-host URL alone: 0 the primary, 1 the standby."""
    hosts = url.split("@", 1)[1].split("/", 1)[0].split(",")
    return f"postgresql://postgres@{hosts[index]}/test"


async def _lag_bytes(url: str) -> int | None:
    """How far the standby's received WAL is behind the primary's, in bytes (None: no
    standby streaming)."""
    async with await psycopg.AsyncConnection.connect(_host_url(url, 0)) as conn:
        cursor = await conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), write_lsn) FROM pg_stat_replication"
        )
        row = await cursor.fetchone()
    return None if row is None or row[0] is None else int(row[0])


async def _wait(what: str, done: Callable[[], bool | Awaitable[bool]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = done()
        if result if isinstance(result, bool) else await result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        await asyncio.sleep(0.2)


def _stop(process: subprocess.Popen[bytes], grace: float = 30) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


async def _listening(url: str, pids: list[int]) -> int:
    """How many of the processes ``pids`` hold a LISTEN session on ``url``'s server, which must
    be a primary."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute("SELECT pg_is_in_recovery()")
        assert await cursor.fetchone() == (False,), "the standby was not promoted"
        cursor = await conn.execute(
            "SELECT application_name FROM pg_stat_activity"
            " WHERE application_name LIKE 'queuey-listen %'"
        )
        names = [row[0] for row in await cursor.fetchall()]
    return sum(any(f":{pid}:" in name for name in names) for pid in pids)


async def _unfinished(url: str, schema: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            psycopg.sql.SQL(
                "SELECT count(*) FROM {} WHERE status IN ('pending', 'running')"
            ).format(psycopg.sql.Identifier(schema, "queue_message"))
        )
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


class Run:
    """One trial's processes and record files (``failover_app``)."""

    def __init__(self, url: str, schema: str, where: Path) -> None:
        self.url, self.schema = url, schema
        self.producer_file = where / "producer.txt"
        self.worker_files = [where / "worker1.txt", where / "worker2.txt"]
        self.errors = where / "stderr.txt"
        self.processes: list[subprocess.Popen[bytes]] = []

    def spawn(self, command: list[str], records: Path) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "PYTHONPATH": python_path(),
            "QUEUEY_DATABASE_URL": self.url,
            "QUEUEY_TEST_SCHEMA": self.schema,
            "QUEUEY_TEST_RECORDS": str(records),
        }
        with self.errors.open("ab") as errors:
            process = subprocess.Popen(command, cwd=ROOT, env=env, stderr=errors)
        self.processes.append(process)
        return process

    def read(self, trial: Trial) -> Trial:
        trial.read(self.producer_file, self.worker_files)
        return trial

    def stop_all(self) -> None:
        for process in self.processes:
            _stop(process)


async def _enqueue_backlog(url: str, schema: str) -> dict[str, float]:
    await migrate(url, schema=schema)
    async with PostgresBackend(url, schema=schema) as backend:
        producer = await Producer.create(FailoverQueues, backend)
        ids = await producer.enqueue_many([Task(n=-n) for n in range(1, BACKLOG + 1)])
    return dict.fromkeys(ids, time.time())


async def _probe(url: str, schema: str, run: Run, trial: Trial) -> None:
    """Enqueue one job once the drain is over; ``trial.probe_s``: seconds until it ran."""
    async with PostgresBackend(url, schema=schema, poll_interval="60s") as backend:
        producer = await Producer.create(FailoverQueues, backend)
        await asyncio.sleep(1)
        began = time.time()
        job = await producer.enqueue(Task(n=0))
    await _wait("the probe job's run", lambda: job in run.read(trial).runs, timeout=40)
    trial.probe_s = trial.runs[job][0] - began


async def _crash_lagging(url: str, trial: Trial) -> None:
    """Hold the primary's WAL sender (SIGSTOP) for ``trial.held_s`` seconds, as a slow network
    would, then stop the primary at once; the sender is killed before it sends what it held."""
    async with await psycopg.AsyncConnection.connect(_host_url(url, 0)) as conn:
        cursor = await conn.execute("SELECT pid FROM pg_stat_replication")
        row = await cursor.fetchone()
    assert row is not None, "no WAL sender on the primary"
    sender = int(row[0])
    os.kill(sender, signal.SIGSTOP)
    try:
        await asyncio.sleep(trial.held_s)
        trial.stopped = time.time()
        stopping = asyncio.create_task(asyncio.to_thread(_pair, "stop-primary"))
        await asyncio.sleep(0.5)  # the postmaster has told every child to quit
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(sender, signal.SIGKILL)
    await stopping


async def _fail_over(run: Run, trial: Trial) -> None:
    """Wait until both workers and the producer are going; stop the primary, promote the
    standby; let the producer go on until everyone is back (and a few seconds more)."""

    def going() -> bool:
        run.read(trial)
        return len(trial.ok) >= 50 and all(len(s) >= 100 for s in trial.settled_by.values())

    await _wait("both workers and the producer going", going, timeout=90)
    trial.lag_bytes = await _lag_bytes(run.url)
    if trial.held_s:
        await _crash_lagging(run.url, trial)
    else:
        trial.stopped = time.time()
        await asyncio.to_thread(_pair, "stop-primary")
    await asyncio.to_thread(_pair, "promote")
    trial.promoted = time.time()

    def back() -> bool:
        run.read(trial)
        workers = [trial.worker_back_s(i) for i in range(len(run.worker_files))]
        return trial.producer_back_s() is not None and None not in workers

    with contextlib.suppress(AssertionError):  # measured, and asserted, by the caller
        await _wait("the producer and both workers back", back, timeout=CONTINUE_WITHIN + 20)
    await asyncio.sleep(max(0.0, trial.promoted + 6 - time.time()))


async def _trial(sync: bool, where: Path, held_s: float = 0.0) -> Trial:
    """One failover on a fresh pair, stopped (and its processes) whatever happens; with
    ``held_s``, the standby that many seconds behind at the crash."""
    trial = Trial(sync=sync, held_s=held_s)
    url = await asyncio.to_thread(_start_pair, sync)
    schema = f"fo{uuid.uuid4().hex[:8]}"
    run = Run(url, schema, where)
    try:
        trial.backlog = await _enqueue_backlog(url, schema)
        workers = [run.spawn(WORKER, path) for path in run.worker_files]
        producer = run.spawn(PRODUCER, run.producer_file)
        await _fail_over(run, trial)
        _stop(producer)

        async def drained() -> bool:
            run.read(trial)
            return set(trial.enqueued()) <= set(trial.runs) or not await _unfinished(url, schema)

        await _wait("the drain", drained, timeout=90)
        await _probe(url, schema, run, trial)
        trial.listening = await _listening(_host_url(url, 1), [w.pid for w in workers])
    finally:
        run.stop_all()
        await asyncio.to_thread(_pair, "stop")
    run.read(trial)
    print(trial.report())
    if REPORT:
        with open(REPORT, "a") as out:
            out.write(trial.report() + "\n")
    return trial


def _assert_carried_on(trial: Trial) -> None:
    assert len(trial.runs) >= BACKLOG, trial.report()
    assert trial.waiting_at_stop() > 0, f"not mid-drain: {trial.report()}"
    back = trial.producer_back_s()
    assert back is not None and back < CONTINUE_WITHIN, trial.report()
    for index in (0, 1):
        back = trial.worker_back_s(index)
        assert back is not None and back < CONTINUE_WITHIN, trial.report()
    assert trial.listening == 2, f"LISTEN sessions on the new primary: {trial.listening}"
    assert trial.probe_s is not None and trial.probe_s < LISTEN_WITHIN, trial.report()
    assert all(trial.stopped <= at < trial.promoted + CONTINUE_WITHIN for at in trial.fails)


async def test_synchronous_replication_loses_nothing_that_was_acknowledged(
    tmp_path: Path,
) -> None:
    trial = await _trial(sync=True, where=tmp_path)
    _assert_carried_on(trial)
    assert not trial.lost_enqueues(), trial.report()
    assert not trial.lost_completions(), trial.report()


def _assert_lost_only_since(trial: Trial, since: float) -> None:
    """Whatever was lost had been acknowledged after ``since`` (and not after the crash)."""
    lost = [*trial.lost_enqueues().values(), *trial.lost_completions().values()]
    assert all(since < at < trial.stopped + 1 for at in lost), trial.report()


@pytest.mark.timeout(60 + 45 * TRIALS)
async def test_asynchronous_replication_loses_only_the_last_moments(tmp_path: Path) -> None:
    for number in range(TRIALS):
        where = tmp_path / f"trial{number}"
        where.mkdir()
        trial = await _trial(sync=False, where=where)
        _assert_carried_on(trial)
        _assert_lost_only_since(trial, trial.stopped - LOSS_WINDOW)


async def test_an_asynchronous_standby_behind_loses_what_it_had_not_received(
    tmp_path: Path,
) -> None:
    trial = await _trial(sync=False, where=tmp_path, held_s=HELD)
    _assert_carried_on(trial)
    assert trial.lost_enqueues(), f"nothing lost: {trial.report()}"
    assert trial.lost_completions(), f"nothing lost: {trial.report()}"
    _assert_lost_only_since(trial, trial.stopped - HELD - LOSS_WINDOW)
