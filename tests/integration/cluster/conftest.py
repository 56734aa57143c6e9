"""The local three-node RabbitMQ cluster of ``scripts/rabbitmq-cluster``, for the tests marked
``cluster``.

The session starts the cluster (unless ``QUEUEY_TEST_CLUSTER_URLS`` names one already running,
e.g. started by hand with ``eval "$(scripts/rabbitmq-cluster start)"``), and stops it at the
end if it started it. A cluster that does not come up skips these tests locally and fails them
under ``CI=true``. A test that kills a node starts it again afterwards.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import pytest

from tests.conftest import unavailable
from tests.helpers import ROOT

SCRIPT = ROOT / "scripts" / "rabbitmq-cluster"
URLS = "QUEUEY_TEST_CLUSTER_URLS"


def _run(*args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/rabbitmq-cluster {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class Cluster:
    """Three nodes, 1..3, and their AMQP URLs (``urls[n - 1]`` is node ``n``'s)."""

    urls: list[str]
    killed: set[int] = field(default_factory=set)

    def pid(self, node: int) -> int:
        """The OS pid of node ``node``'s Erlang VM."""
        return int(_run("pid", str(node)).strip())

    async def kill(self, node: int) -> None:
        """SIGKILL node ``node``'s Erlang VM and wait until it is gone."""
        pid = self.pid(node)
        os.kill(pid, signal.SIGKILL)
        self.killed.add(node)
        async with asyncio.timeout(10):
            while _alive(pid):
                await asyncio.sleep(0.05)

    def ctl(self, node: int, *args: str) -> str:
        """``rabbitmqctl ARGS`` against node ``node``; its standard output."""
        return _run("ctl", str(node), *args, timeout=60)

    def leader(self, queue: str) -> int:
        """The node leading quorum queue ``queue``."""
        for line in self.ctl(self._live(), "-q", "list_queues", "name", "leader").splitlines():
            name, _, leader = line.partition("\t")
            if name == queue:
                return int(leader.split("@")[0].removeprefix("queuey-c"))
        raise AssertionError(f"no queue {queue!r} on the cluster")

    def revive(self) -> None:
        """Start every killed node again (it rejoins the cluster by itself)."""
        for node in sorted(self.killed):
            _run("start-node", str(node), timeout=240)
        self.killed.clear()

    def _live(self) -> int:
        return next(node for node in (1, 2, 3) if node not in self.killed)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="session")
def rabbit_cluster_session() -> Iterator[Cluster]:
    """The running cluster for the whole session (started, and stopped, here if need be)."""
    given = os.environ.get(URLS)
    if given:
        yield Cluster(given.split())
        return
    try:
        out = _run("start")
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        unavailable("the local three-node RabbitMQ cluster (scripts/rabbitmq-cluster)", exc)
        raise
    exported = shlex.split(out.strip().removeprefix("export "))[0]
    try:
        yield Cluster(exported.removeprefix(f"{URLS}=").split())
    finally:
        _run("stop", timeout=120)


@pytest.fixture
async def rabbit_cluster(rabbit_cluster_session: Cluster) -> AsyncIterator[Cluster]:
    """The cluster, every node it killed started again afterwards."""
    try:
        yield rabbit_cluster_session
    finally:
        await asyncio.to_thread(rabbit_cluster_session.revive)
