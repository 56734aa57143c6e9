"""A payload every backend stores alike, or none: on every backend, a job or topic payload either
comes back from the backend exactly as it went in, or is refused before anything is written,
with a ``PayloadError`` naming the job type (or topic) and the path to an offending value.

What "offending" means is written here independently of ``queuey._payload`` (``offences``): a
non-finite float anywhere, a lone surrogate in a string or a key, an integer of more than 640
digits, nesting deeper than 100 levels.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from queuey import (
    Backend,
    Envelope,
    Job,
    JobContext,
    PayloadError,
    Producer,
    Queue,
    QueueConfig,
    QueueSet,
    Worker,
)
from queuey.topics import QueuesConfig, TopicPublisher

PROPERTY = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MAX_DEPTH = 100
MAX_INT_DIGITS = 640

# -- what may not be stored, written independently of queuey --------------------------------


def offences(value: Any, path: str, depth: int = 0) -> list[str]:
    """Every path inside ``value`` (a Python-mode dump) at which something is not JSON every
    backend stores alike; a too-deep container is reported and not entered."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, float):
        return [] if math.isfinite(value) else [path]
    if isinstance(value, int):
        return [] if len(str(abs(value))) <= MAX_INT_DIGITS else [path]
    if isinstance(value, str):
        return [path] if any(0xD800 <= ord(c) <= 0xDFFF for c in value) else []
    if isinstance(value, list | tuple | dict):
        if depth >= MAX_DEPTH:
            return [path]
        found: list[str] = []
        if isinstance(value, dict):
            for key, item in value.items():
                if offences(key, path, MAX_DEPTH):  # a key is checked like a scalar
                    found.append(path)
                child = f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"
                found += offences(item, child, depth + 1)
        else:
            for index, item in enumerate(value):
                found += offences(item, f"{path}[{index}]", depth + 1)
        return found
    raise AssertionError(f"unexpected {type(value)} in a payload")


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (``1 == 1.0`` is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


# -- strategies --------------------------------------------------------------------------------

characters = st.characters() | st.characters(categories=["Cs"]) | st.just("\x00")
texts = st.lists(characters, max_size=8).map("".join)
floats = st.floats(allow_nan=True, allow_infinity=True)
integers = st.integers() | st.integers(10**630, 10**660) | st.integers(-(10**660), -(10**630))


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


json_values = st.recursive(
    st.none() | st.booleans() | integers | floats | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=12,
) | st.integers(MAX_DEPTH - 3, MAX_DEPTH + 2).map(nested)


# -- a queue set per test ----------------------------------------------------------------------


class Item(BaseModel):
    price: float = 0.0
    tags: list[str] = []


@dataclass
class DocKit:
    """A queue set with one job class ``Doc``, a producer whose backend records every write,
    and a worker running in the background that hands each job it receives to ``received``."""

    queues: type[QueueSet]
    Doc: type[Job[Any]]
    producer: Producer[Any]
    writes: list[str]
    received: dict[str, Any] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def queue(self) -> str:
        return self.Doc.job_queue().name

    async def receive(self, job_id: str, timeout: float = 15) -> Any:
        async with asyncio.timeout(timeout):
            while job_id not in self.received:
                self.arrived.clear()
                await self.arrived.wait()
        return self.received.pop(job_id)


class WriteSpy:
    """A backend that records what the producer asks it to write, then writes it."""

    def __init__(self, inner: Backend, writes: list[str]) -> None:
        self._inner = inner
        self._writes = writes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def publish(self, envelopes: Any, delay: Any = None, *, connection: Any = None) -> None:
        self._writes.append("publish")
        await self._inner.publish(envelopes, delay, connection=connection)

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        self._writes.append("defer")
        await self._inner.defer(envelope, delay)


@pytest.fixture
async def kit(backend: Backend) -> AsyncIterator[DocKit]:
    prefix = f"p{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        docs = Queue(prefetch=16, max_priority=5)

    class Doc(Job[Queues], queue=Queues.docs, name=f"{prefix}.Doc"):
        f: float = 0.0
        s: str = ""
        items: list[Item] = Field(default_factory=list)
        data: Any = None

    writes: list[str] = []
    await Producer.create(Queues, backend)
    producer = Producer(Queues, cast(Backend, WriteSpy(backend, writes)))
    worker = Worker(Queues, backend)
    doc_kit = DocKit(Queues, Doc, producer, writes)

    @worker.handler(Doc)
    async def handle(job: Any, ctx: JobContext) -> None:
        doc_kit.received[ctx.job_id] = job
        doc_kit.arrived.set()

    task = asyncio.create_task(worker.run())
    try:
        yield doc_kit
    finally:
        worker.shutdown()
        await asyncio.wait_for(task, 30)


Enqueue = Callable[[DocKit, Any], Any]
ENQUEUES: dict[str, Enqueue] = {
    "enqueue": lambda kit, job: kit.producer.enqueue(job),
    "enqueue_after": lambda kit, job: kit.producer.enqueue_after(job, "1ms"),
    "defer": lambda kit, job: kit.producer.defer(job, "1ms"),
    "enqueue_many": lambda kit, job: kit.producer.enqueue_many([kit.Doc(s="fine"), job]),
}


def refused(kit: DocKit, job: Any, caught: PayloadError, bad: list[str]) -> None:
    """``caught`` names ``job``'s type and one of the ``bad`` paths, and nothing was written."""
    assert caught.subject == f"job type {kit.Doc.job_name()!r}"
    assert caught.path in bad, (caught.path, bad)
    assert str(caught) == f"{caught.subject}: {caught.path} {caught.problem}"
    assert kit.writes == []
    str(caught).encode()  # the message itself can be logged and stored anywhere


# -- examples of every kind ------------------------------------------------------------------


def examples() -> list[tuple[str, dict[str, Any], str, str]]:
    """``(id, Doc fields, path, what the problem says)``."""
    return [
        ("nan-field", {"f": math.nan}, "Doc.f", "is NaN, which is not JSON"),
        ("inf-field", {"f": -math.inf}, "Doc.f", "is -Infinity, which is not JSON"),
        (
            "nested-model",
            {"items": [Item(), Item(), Item(), Item(price=math.inf)]},
            "Doc.items[3].price",
            "is Infinity",
        ),
        ("nan-in-any", {"data": {"a": [1, {"b": math.nan}]}}, "Doc.data.a[1].b", "is NaN"),
        ("nan-key-value", {"data": {"a b": [math.nan]}}, "Doc.data['a b'][0]", "is NaN"),
        ("surrogate", {"s": "ok \ud800"}, "Doc.s", "lone surrogate ('\\ud800' at index 3)"),
        ("surrogate-deep", {"items": [Item(tags=["a", "\udfff"])]}, "Doc.items[0].tags[1]", ""),
        ("surrogate-key", {"data": {"x": {"k\udc00": 1}}}, "Doc.data.x", "has a key with a lone"),
        ("huge-int", {"data": [10**700]}, "Doc.data[0]", "more than 640 digits"),
        ("too-deep", {"data": nested(MAX_DEPTH)}, "Doc.data" + "[0]" * 99, "deeper than 100"),
        ("not-json", {"data": object()}, "Doc.data", "cannot be serialised"),
    ]


@pytest.mark.parametrize("how", list(ENQUEUES))
@pytest.mark.parametrize(
    ("fields", "path", "problem"),
    [pytest.param(f, p, m, id=i) for i, f, p, m in examples()],
)
async def test_an_unstorable_job_is_refused_before_anything_is_written(
    kit: DocKit, how: str, fields: dict[str, Any], path: str, problem: str
) -> None:
    job = kit.Doc(**fields)
    with pytest.raises(PayloadError) as caught:
        await ENQUEUES[how](kit, job)
    refused(kit, job, caught.value, [path])
    assert problem in caught.value.problem
    assert await kit.producer.backend.count_pending(kit.queue) == 0


async def test_values_at_the_edge_round_trip_exactly(kit: DocKit) -> None:
    edge = {
        "nul": "a\x00b",
        "astral": "\U0001f600",
        "big": 10**640 - 1,
        "small": -(10**640) + 1,
        "u64": 2**64,
        "floats": [1e308, -0.0, 5e-324, 0.1, 1e16],
        "deep": nested(MAX_DEPTH - 2),  # Doc, data and deep: the 100 levels allowed
        "ctrl": "\t\n\x1f\u2028",
    }
    job = kit.Doc(f=-0.0, s="\x00", items=[Item(price=1e-300, tags=["\x00"])], data=edge)
    job_id = await kit.producer.enqueue(job)
    back = await kit.receive(job_id)
    assert same(back.model_dump(), job.model_dump())


# -- any payload: round trip or refusal --------------------------------------------------------


@PROPERTY
@given(f=floats, s=texts, prices=st.lists(floats, max_size=3), data=json_values)
async def test_any_job_round_trips_exactly_or_is_refused_naming_the_field(
    kit: DocKit, f: float, s: str, prices: list[float], data: Any
) -> None:
    kit.writes.clear()
    job = kit.Doc(f=f, s=s, items=[Item(price=p) for p in prices], data=data)
    bad = offences(job.model_dump(), "Doc")
    try:
        job_id = await kit.producer.enqueue(job)
    except PayloadError as exc:
        assert bad, f"refused a storable job: {exc}"
        refused(kit, job, exc, bad)
        event("refused")
        return
    assert not bad, f"accepted a job that is not storable at {bad}"
    event("round trip")
    back = await kit.receive(job_id)
    assert same(back.model_dump(), job.model_dump())


# -- topics ------------------------------------------------------------------------------------


@pytest.fixture
async def topic(backend: Backend) -> AsyncIterator[tuple[TopicPublisher, QueueConfig]]:
    name = f"t{uuid.uuid4().hex[:8]}.happened"
    config = QueueConfig(name, kind="topic", max_priority=0)
    await backend.declare([config])
    publisher = TopicPublisher(QueuesConfig(subscribe={name: "handle"}), backend)
    yield publisher, config


async def delivered_payload(backend: Backend, config: QueueConfig) -> Any:
    consumer = backend.consumer(config)
    try:
        async with asyncio.timeout(15):
            delivery = await consumer.next()
        assert delivery is not None
        await delivery.ack()
        return delivery.envelope.payload
    finally:
        await consumer.stop()


@PROPERTY
@given(payload=json_values)
async def test_any_topic_payload_round_trips_or_is_refused_naming_the_topic_and_path(
    backend: Backend, topic: tuple[TopicPublisher, QueueConfig], payload: Any
) -> None:
    publisher, config = topic
    bad = offences(payload, "payload")
    try:
        await publisher.publish(config.name, payload)
    except PayloadError as exc:
        assert bad, f"refused a storable payload: {exc}"
        assert exc.subject == f"topic {config.name!r}"
        assert exc.path in bad, (exc.path, bad)
        assert await backend.count_pending(config.name, "topic") == 0
        event("refused")
        return
    assert not bad, f"accepted a payload that is not storable at {bad}"
    event("round trip")
    assert same(await delivered_payload(backend, config), payload)


async def test_a_topic_payload_is_delivered_as_its_json_reads_back(
    backend: Backend, topic: tuple[TopicPublisher, QueueConfig]
) -> None:
    publisher, config = topic
    await publisher.publish(config.name, {"tuple": (1, 2), 3: "int key", None: True})
    expected = {"tuple": [1, 2], "3": "int key", "null": True}
    assert same(await delivered_payload(backend, config), expected)
