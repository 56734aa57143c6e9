"""The jobs of the workflow durability proof (``test_workflow_proof.py``) and its worker
process. Every handler run writes its own record, so the test can tell runs from recorded
completions:

- a member (``Member``) or a group's fan-in callback (``GroupTotal``) appends one JSON line to
  ``<records>/<pid>.jsonl`` as it returns (kind, key, job id, attempt, pid, and for a callback
  the member tokens it was built from), and returns a ``Token`` naming its key and attempt: the
  fan-in that receives the token knows which run's completion was recorded;
- the final callback (``Final``, no result) inserts its row into ``<schema>.proof_final`` in
  ``ctx.transaction()``: the row commits with the job's completion, or not at all.

A kill between a record and the ack leaves a run recorded whose completion never was (its row
is redelivered, with a higher attempt): that is a second run, not a second completion.

Usage: ``python -m tests.integration.postgres.proof_app URL SCHEMA RECORDS_DIR``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from psycopg import sql
from pydantic import BaseModel

from queuey import Job, JobContext, Queue, QueueSet, RetryPolicy, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.cli import run_until_signal

MAX_REDELIVERIES = 10
"""Lost leases a row survives (20 kills may hit one row more than the default 5 times)."""
STEP_SECONDS = 0.1
"""How long a member holds its row (asleep: no CPU), so that a kill lands mid-step."""


class ProofQueues(QueueSet, prefix="proof"):
    steps = Queue(prefetch=32, retry=RetryPolicy.none())


class Token(BaseModel):
    """Which run of a step completed: its key and attempt."""

    key: str
    attempt: int


class Member(Job[ProofQueues, Token], queue=ProofQueues.steps, name="proof.Member"):
    key: str


class GroupTotal(Job[ProofQueues, Token], queue=ProofQueues.steps, name="proof.GroupTotal"):
    tokens: list[Token]

    @classmethod
    def from_members(cls, tokens: list[Token]) -> GroupTotal:
        return cls(tokens=tokens)


class Final(Job[ProofQueues], queue=ProofQueues.steps, name="proof.Final"):
    tokens: list[Token]

    @classmethod
    def from_groups(cls, tokens: list[Token]) -> Final:
        return cls(tokens=tokens)


def group_key(tokens: list[Token]) -> str:
    """The key of the group whose members' tokens these are ("g<n>" from "<n>-<m>")."""
    return "g" + tokens[0].key.split("-")[0] if tokens else "g?"


def register(worker: Worker[ProofQueues], schema: str, records: Path) -> None:
    """The handlers, writing their records as the module docstring says."""
    log = (records / f"{os.getpid()}.jsonl").open("a", buffering=1)
    final = sql.SQL("INSERT INTO {} (job_id, attempt, tokens) VALUES (%s, %s, %s)").format(
        sql.Identifier(schema, "proof_final")
    )

    def record(kind: str, key: str, ctx: JobContext, got: list[Token] | None = None) -> None:
        line: dict[str, Any] = {"kind": kind, "key": key, "job": ctx.job_id}
        line |= {"attempt": ctx.attempt, "pid": os.getpid()}
        if got is not None:
            line["got"] = [[t.key, t.attempt] for t in got]
        log.write(json.dumps(line) + "\n")

    @worker.handler(Member)
    async def member(job: Member, ctx: JobContext) -> Token:
        await asyncio.sleep(STEP_SECONDS)
        record("member", job.key, ctx)
        return Token(key=job.key, attempt=ctx.attempt)

    @worker.handler(GroupTotal)
    async def group_total(job: GroupTotal, ctx: JobContext) -> Token:
        key = group_key(job.tokens)
        record("group", key, ctx, job.tokens)
        return Token(key=key, attempt=ctx.attempt)

    @worker.handler(Final)
    async def finish(job: Final, ctx: JobContext) -> None:
        tokens = json.dumps([[t.key, t.attempt] for t in job.tokens])
        async with ctx.transaction() as conn:
            await conn.execute(final, (ctx.job_id, ctx.attempt, tokens))


async def main(url: str, schema: str, records: str) -> None:
    backend = await PostgresBackend.connect(
        url,
        schema=schema,
        lease="2s",
        poll_interval="500ms",
        max_redeliveries=MAX_REDELIVERIES,
    )
    worker = Worker(ProofQueues, backend, concurrency=32, close_backend_on_shutdown=True)
    register(worker, schema, Path(records))
    print("ready", flush=True)
    await run_until_signal(worker.run, worker.shutdown)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
