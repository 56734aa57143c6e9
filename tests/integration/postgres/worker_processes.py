"""Worker subprocesses (``threads_app``) and the queries the reliability tests read rows with."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import IO, Any

import psycopg
from psycopg import sql

from tests.helpers import ROOT, python_path

__all__ = ["WorkerProcess", "execute", "message_rows", "run_rows", "wait_for"]


class WorkerProcess:
    """One ``threads_app`` worker; ``start`` waits until it says it is ready."""

    def __init__(
        self, url: str, schema: str, concurrency: int, grace: str = "none", lease: str = "1s"
    ) -> None:
        self.args = [
            sys.executable,
            "-m",
            "tests.integration.postgres.threads_app",
            url,
            schema,
            str(concurrency),
            grace,
            lease,
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.exited_at: float | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> WorkerProcess:
        env = {**os.environ, "PYTHONPATH": python_path()}
        self.proc = subprocess.Popen(self.args, cwd=ROOT, env=env, stdout=subprocess.PIPE)
        ready = threading.Event()

        def watch(stream: IO[bytes]) -> None:
            for line in stream:
                if line.strip() == b"ready":
                    ready.set()
            ready.set()

        assert self.proc.stdout is not None
        threading.Thread(target=watch, args=(self.proc.stdout,), daemon=True).start()
        ready.wait(timeout=60)
        assert self.proc.poll() is None, f"worker exited at start-up with {self.proc.returncode}"
        return self

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    async def exited(self, timeout: float) -> int:
        """Wait for the process to end; records when (wall clock) in ``exited_at``."""
        assert self.proc is not None
        proc = self.proc
        code = await asyncio.wait_for(asyncio.to_thread(proc.wait), timeout)
        self.exited_at = time.time()
        return code

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


async def execute(url: str, statement: sql.Composed | str, *params: Any) -> list[Any]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(statement, params)
        return await cursor.fetchall() if cursor.description else []


async def run_rows(url: str, schema: str) -> list[tuple[int, int, int, float, float | None]]:
    """Every recorded run: (n, pid, attempt, started, ended) as epoch seconds, by start."""
    rows = await execute(
        url,
        sql.SQL(
            "SELECT n, pid, attempt, extract(epoch FROM started)::float8, "
            "extract(epoch FROM ended)::float8 FROM {} ORDER BY started"
        ).format(sql.Identifier(schema, "runs")),
    )
    return [tuple(row) for row in rows]


async def message_rows(url: str, schema: str) -> dict[int, tuple[str, int, int, str | None]]:
    """Per job ``n``: (status, attempts, redeliveries, error)."""
    rows = await execute(
        url,
        sql.SQL(
            "SELECT (payload->>'n')::int, status, attempts, redeliveries, error FROM {}"
        ).format(sql.Identifier(schema, "queue_message")),
    )
    return {
        n: (status, attempts, redeliveries, error)
        for n, status, attempts, redeliveries, error in rows
    }


async def wait_for(predicate: Callable[[], Awaitable[bool]], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.1)
