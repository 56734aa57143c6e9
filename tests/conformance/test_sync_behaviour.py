"""``queuey.sync.Producer`` behaves as ``queuey.Producer``, method by method, on PostgreSQL
(``SyncPostgresBackend``, the same statements) and in memory (``ThreadedBackend``): the same
scenario runs through each producer and yields the same transcript: what each call returned
(``EnqueueResult`` and its ``inserted``, a result handle), where each job then is (``job``),
what ``cancel`` answered, and which errors were raised with which messages. Job ids and
times differ; everything else must not."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from queuey import (
    EnqueueResult,
    Job,
    Producer,
    Queue,
    QueueSet,
    Unique,
    sync,
)
from queuey.backends.base import Backend

Call = Callable[..., Awaitable[Any]]


def _kit() -> dict[str, Any]:
    prefix = f"s{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        mail = Queue(max_priority=5)

    class Other(QueueSet, prefix=f"{prefix}o"):
        misc = Queue()

    class Send(Job[Queues], queue=Queues.mail, name="Send"):
        to: str

    class Digest(Job[Queues], queue=Queues.mail, name="Digest", unique=Unique(by=("user",))):
        user: int
        note: str = ""

    class Debounced(
        Job[Queues],
        queue=Queues.mail,
        name="Debounced",
        unique=Unique(by=("user",), on_conflict="replace"),
    ):
        user: int
        note: str = ""

    class Total(Job[Queues, int], queue=Queues.mail, name="Total"):
        n: int

    class Stray(Job[Other], queue=Other.misc, name="Stray"):
        pass

    return {
        "prefix": prefix,
        "queues": Queues,
        "Send": Send,
        "Digest": Digest,
        "Debounced": Debounced,
        "Total": Total,
        "Stray": Stray,
    }


def _result(value: Any, ids: dict[str, str]) -> Any:
    """A returned value with its job id replaced by its first-seen label."""
    if isinstance(value, list):
        return [_result(item, ids) for item in value]
    if isinstance(value, EnqueueResult):
        label = ids.setdefault(value.job_id, f"job{len(ids)}")
        kind = "handle" if hasattr(value, "result") else "id"
        return (kind, label, value.inserted, value.outcome)
    return value


async def _scenario(call: Call, kit: dict[str, Any]) -> list[Any]:
    ids: dict[str, str] = {}
    out: list[Any] = []

    async def step(name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            value = await call(name, *args, **kwargs)
        except Exception as exc:
            out.append((name, type(exc).__name__, str(exc).replace(kit["prefix"], "P")))
            return None
        out.append((name, _result(value, ids)))
        return value

    send, digest, debounced = kit["Send"], kit["Digest"], kit["Debounced"]
    plain = await step("enqueue", send(to="a@b.c"), priority=2)
    first = await step("enqueue", digest(user=1))
    await step("enqueue", digest(user=1, note="again"))
    await step("enqueue_after", debounced(user=7, note="old"), "1h")
    await step("enqueue_after", debounced(user=7, note="new"), "2h")
    await step("defer", digest(user=2), "30s")
    await step("defer", digest(user=2), "30s")
    await step("enqueue", kit["Total"](n=3))
    await step(
        "enqueue_many",
        [digest(user=3), digest(user=3), send(to="x@y.z"), digest(user=1)],
        delay="1m",
    )
    await step("enqueue_many", [send(to="p@q.r"), send(to="s@t.u")])
    await step("enqueue_many", [])
    await step("enqueue", send(to="a@b.c"), priority=9)
    await step("enqueue", kit["Stray"]())
    await step("enqueue_after", send(to="a@b.c"), "-1s")
    for job_id in (plain, first):
        info = await call("job", job_id)
        due_in = (info.due_at - datetime.now(UTC)).total_seconds()
        out.append(
            (
                "job",
                info.state,
                info.queue.split(".", 1)[1],
                info.job_type,
                info.attempts,
                info.priority,
                info.payload,
                due_in < 5,
            )
        )
    debounced_ids = [v for v in ids if ids[v] == "job2"]
    info = await call("job", debounced_ids[0])
    out.append(("replaced", info.payload, info.due_at > datetime.now(UTC) + timedelta(minutes=90)))
    await step("cancel", first)
    await step("cancel", first)
    await step("cancel", str(uuid.uuid4()))
    return out


async def _transcripts(async_backend: Backend, sync_backend: Any) -> tuple[list[Any], list[Any]]:
    kit = _kit()
    producer = await Producer.create(kit["queues"], async_backend)

    async def via_async(name: str, *args: Any, **kwargs: Any) -> Any:
        return await getattr(producer, name)(*args, **kwargs)

    twin_kit = _kit()
    twin = await asyncio.to_thread(sync.Producer.create, twin_kit["queues"], sync_backend)

    async def via_sync(name: str, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(twin, name), *args, **kwargs)

    return await _scenario(via_async, kit), await _scenario(via_sync, twin_kit)


async def test_every_method_behaves_as_the_async_producers(backend: Backend) -> None:
    kind = type(backend).__name__
    if kind == "RabbitMqBackend":
        pytest.skip("no unique jobs, cancel or lookup on RabbitMQ (both producers refuse alike)")
    if kind == "PostgresBackend":
        twin: Any = sync.PostgresBackend.connect(
            backend.conninfo,  # type: ignore[attr-defined]
            schema=backend.statements.schema,  # type: ignore[attr-defined]
        )
    else:
        twin = sync.ThreadedBackend(backend, loop=asyncio.get_running_loop())
        twin.open()
    try:
        expected, actual = await _transcripts(backend, twin)
    finally:
        await asyncio.to_thread(twin.close)
    if kind == "PostgresBackend":
        # The one documented difference: SyncPostgresBackend cannot wait for results, so a job
        # declaring a result type is refused (ThreadedBackend over PostgresBackend takes it).
        (refused,) = [step for step in actual if "NotSupportedError" in step]
        assert step_of(refused) == "enqueue" and "ThreadedBackend" in refused[2]
        (handle,) = [step for step in expected if step[0] == "enqueue" and step[1][0] == "handle"]
        first = int(handle[1][1][3:])
        actual = [handle if step is refused else _shift(step, first) for step in actual]
        assert actual == expected
    else:
        assert actual == expected
        assert any(step[0] == "enqueue" and step[1][0] == "handle" for step in actual)
    assert ("enqueue", ("id", "job1", False, "skipped")) in actual  # the duplicate was refused


def step_of(step: tuple[Any, ...]) -> Any:
    return step[0]


def _shift(step: Any, first: int) -> Any:
    """``step`` with each job label ``jobN``, N >= ``first``, renumbered N + 1 (the labels after
    an enqueue the sync backend refused, which took no label)."""
    if isinstance(step, str) and step.startswith("job") and step[3:].isdigit():
        number = int(step[3:])
        return f"job{number + 1}" if number >= first else step
    if isinstance(step, tuple):
        return tuple(_shift(part, first) for part in step)
    if isinstance(step, list):
        return [_shift(part, first) for part in step]
    return step
