"""The durability proof of workflows on PostgreSQL: a workflow of 10,000 steps (100 groups of
100 members, a fan-in callback per group, a final callback over the 100) completes while worker
processes are killed with SIGKILL 20 times and PostgreSQL is restarted once.

Checked from the handlers' own records (``proof_app``), not only from the table:

- no step lost: every member and every callback ran, and every row ended ``done``;
- no completion recorded twice: a run is what a handler recorded, a recorded completion is the
  run whose token (key, attempt) the next step received. Every step's completion is seen by
  its fan-in exactly once, and it is the completion the table holds (the row's result); every
  run of a fan-in callback was built from the same tokens (its input was fixed once, when its
  last member ended); a step ran more than once only after losing leases (runs <= 1 +
  redeliveries: the kills);
- each fan-in callback ran to a recorded completion exactly once: one callback job per group,
  the final callback received each group's token once, and the final callback (completed in
  its own transaction with its record) committed one record.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from queuey import Producer
from queuey.backends.postgres import PostgresBackend
from queuey.jobs import NoResult
from queuey.workflows import Workflow, group
from tests.integration.postgres.proof_app import Final, GroupTotal, Member, ProofQueues
from tests.integration.postgres.test_crash import Fleet, restart_postgres

pytestmark = pytest.mark.postgres

GROUPS = MEMBERS = 100
STEPS = GROUPS * MEMBERS + GROUPS + 1
KILLS = 20
WORKERS = 3
DEADLINE = 170.0
"""Seconds the workflow may take, kills and restart included (the proof asks < 3 minutes)."""


class ProofFleet(Fleet):
    """Worker subprocesses running ``proof_app``; ``ready`` holds those that said so."""

    def __init__(self, url: str, schema: str, records: Path) -> None:
        super().__init__(url, schema, 1)
        module = "tests.integration.postgres.proof_app"
        self.args = [sys.executable, "-m", module, url, schema, str(records)]
        self.ready: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        proc = super().start()
        self.ready.append(proc)
        return proc

    def kill_ready(self, rng: random.Random) -> bool:
        """SIGKILL one worker that is up and running; false when none is."""
        victims = [p for p in self.ready if p.poll() is None]
        if not victims:
            return False
        rng.choice(victims).send_signal(signal.SIGKILL)
        return True


@pytest.fixture
async def proof_schema(database_url: str, pg_schema: str) -> AsyncIterator[str]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        final = sql.Identifier(pg_schema, "proof_final")
        create = "CREATE TABLE {} (job_id text, attempt int, tokens jsonb)"
        await conn.execute(sql.SQL(create).format(final))
    yield pg_schema


def workflow() -> Workflow[NoResult]:
    groups = [
        group(*(Member(key=f"{g}-{m}") for m in range(MEMBERS))).then(GroupTotal.from_members)
        for g in range(GROUPS)
    ]
    return group(*groups).then(Final.from_groups)


async def query(url: str, text: str, schema: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        table = sql.Identifier(schema, "queue_message")
        final = sql.Identifier(schema, "proof_final")
        cursor = await conn.execute(sql.SQL(text).format(table=table, final=final))
        return await cursor.fetchall()


async def done_count(url: str, schema: str) -> int:
    """Rows done so far; -1 while the database does not answer (restarting)."""
    try:
        rows = await query(url, "SELECT count(*) FROM {table} WHERE status = 'done'", schema)
    except psycopg.OperationalError:
        return -1
    return int(rows[0][0])


@dataclass
class Run:
    """What the test did to the workers and the database, and when."""

    kills_at: list[int] = field(default_factory=list)  # done rows when each kill landed
    restart_at: int = -1
    seconds: float = 0.0
    runs: int = 0  # handler runs recorded (members and group callbacks)
    rerun: int = 0  # steps that ran more than once (their worker was killed mid-step)


async def drive(
    url: str, schema: str, workers: ProofFleet, restart: Callable[[], Awaitable[None]]
) -> Run:
    """Kill a running worker each time another 1/(KILLS + 2) of the steps is done, starting a
    replacement at once (in the background), restart the database after the tenth kill, and
    wait for every step."""
    rng = random.Random(31)
    run = Run()
    started = time.monotonic()
    replacements: list[asyncio.Task[subprocess.Popen[bytes]]] = []
    async with asyncio.timeout(DEADLINE):
        for kill in range(1, KILLS + 1):
            while await done_count(url, schema) < kill * STEPS // (KILLS + 2):
                await asyncio.sleep(0.05)
            if kill == KILLS // 2:  # no worker is starting while the database restarts
                await asyncio.gather(*replacements)
            while not workers.kill_ready(rng):
                await asyncio.sleep(0.05)
            run.kills_at.append(await done_count(url, schema))
            if kill == KILLS // 2:
                await restart()
                run.restart_at = await done_count(url, schema)
            replacements.append(asyncio.create_task(asyncio.to_thread(workers.start)))
        while await done_count(url, schema) < STEPS:
            await asyncio.sleep(0.1)
    run.seconds = time.monotonic() - started
    await asyncio.gather(*replacements)
    return run


def handler_records(records: Path) -> list[dict[str, Any]]:
    """Every complete line the handlers wrote (a process killed mid-write may leave a partial
    last line: not a record)."""
    lines = []
    for path in records.glob("*.jsonl"):
        text = path.read_text()
        complete = text if text.endswith("\n") else text.rsplit("\n", 1)[0]
        lines += [json.loads(line) for line in complete.splitlines() if line]
    return lines


async def prove(
    url: str, schema: str, records: Path, restart: Callable[[], Awaitable[None]]
) -> Run:
    """Run the proof's workflow under kills and ``restart``; returns what happened."""
    async with await PostgresBackend.connect(url, schema=schema, publish_timeout="60s") as backend:
        producer = await Producer.create(ProofQueues, backend)
        await producer.enqueue_workflow(workflow())
    workers = ProofFleet(url, schema, records)
    for _ in range(WORKERS):
        workers.start()
    try:
        run = await drive(url, schema, workers, restart)
    finally:
        workers.stop()
    killed = sum(1 for p in workers.procs if p.returncode == -signal.SIGKILL)
    assert killed == KILLS, f"{killed} workers were killed, {KILLS} kills were sent"
    assert all(0 <= at < STEPS for at in run.kills_at), run.kills_at  # each one mid-workflow
    assert 0 <= run.restart_at < STEPS, run.restart_at
    lines = handler_records(records)
    await check(url, schema, lines)
    run.runs = len({(line["job"], line["attempt"]) for line in lines})
    run.rerun = run.runs - len({line["job"] for line in lines})
    return run


async def check(url: str, schema: str, lines: list[dict[str, Any]]) -> None:
    """The assertions of the module docstring."""
    rows = await query(
        url,
        "SELECT id::text, job_type, status, attempts, redeliveries, result FROM {table}",
        schema,
    )
    assert {status for _, _, status, _, _, _ in rows} == {"done"}
    assert len(rows) == STEPS
    row_of = {row_id: (attempts, lost, result) for row_id, _, _, attempts, lost, result in rows}
    assert sum(lost for _, lost, _ in row_of.values()) > 0, "no kill landed mid-step"
    runs: dict[str, set[int]] = defaultdict(set)  # job id -> attempts that ran
    built: dict[str, set[str]] = defaultdict(set)  # callback job id -> inputs of its runs
    key_of: dict[str, str] = {}
    for line in lines:
        runs[line["job"]].add(line["attempt"])
        key_of[line["job"]] = line["key"]
        if line["kind"] == "group":
            built[line["job"]].add(json.dumps(line["got"]))
    # No step lost: every member and group callback ran (the final one: below).
    member_keys = {f"{g}-{m}" for g in range(GROUPS) for m in range(MEMBERS)}
    ran = {line["key"] for line in lines}
    assert ran == member_keys | {f"g{g}" for g in range(GROUPS)}
    # A step ran again only after losing a lease.
    for job_id, attempts in runs.items():
        assert len(attempts) <= 1 + row_of[job_id][1], (key_of[job_id], attempts, row_of[job_id])
    # Each completion recorded once: the token each fan-in received is the row's result, and
    # a run that really happened.
    completed = {key_of[job_id]: row_of[job_id][2] for job_id in runs}
    for job_id, attempt_tokens in built.items():
        assert len(attempt_tokens) == 1, f"callback {job_id} was built from different inputs"
        tokens = json.loads(next(iter(attempt_tokens)))
        group_no = key_of[job_id][1:]
        assert sorted(k for k, _ in tokens) == sorted(f"{group_no}-{m}" for m in range(MEMBERS))
        for key, attempt in tokens:
            assert completed[key] == {"key": key, "attempt": attempt}, (key, completed[key])
    assert len(built) == GROUPS, "one callback job per group"
    final = await query(url, "SELECT job_id, tokens FROM {final}", schema)
    assert len(final) == 1, f"the final callback committed {len(final)} records"
    tokens = final[0][1]
    assert sorted(k for k, _ in tokens) == sorted(f"g{g}" for g in range(GROUPS))
    for key, attempt in tokens:
        assert completed[key] == {"key": key, "attempt": attempt}, (key, completed[key])


@pytest.mark.serial
@pytest.mark.timeout(DEADLINE + 60)  # start-up, stop and checks after the workflow
async def test_a_10000_step_workflow_survives_20_kills_and_a_database_restart(
    database_url: str, proof_schema: str, tmp_path: Path
) -> None:
    if not Path("/etc/postgresql").exists():
        pytest.skip("no local PostgreSQL cluster to restart")
    started = time.monotonic()
    run = await prove(
        database_url, proof_schema, tmp_path, lambda: asyncio.to_thread(restart_postgres)
    )
    print(
        f"\nworkflow proof: {STEPS} steps, {KILLS} SIGKILLs (at {run.kills_at} done), 1 restart "
        f"(at {run.restart_at} done), {run.runs} handler runs ({run.rerun} again after a kill), "
        f"workflow {run.seconds:.1f}s, test "
        f"{time.monotonic() - started:.1f}s"
    )
