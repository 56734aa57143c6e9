"""The one payload check (``queuey._payload``): what it refuses, how it names the place, and that
it takes exactly what ``json.dumps`` writes faithfully."""

from __future__ import annotations

import json
import math
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, field_serializer

from queuey import MemoryBackend, PayloadError, QueueyError
from queuey._payload import MAX_DEPTH, check_json, job_payload, topic_payload

characters = st.characters() | st.characters(categories=["Cs"]) | st.just("\x00")
texts = st.lists(characters, max_size=6).map("".join)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(10**635, 10**645)
    | st.floats(allow_nan=True, allow_infinity=True)
    | texts
    | st.binary(max_size=3)
    | st.sets(st.integers(), max_size=2)
)
keys = texts | st.integers() | st.floats() | st.none() | st.booleans()
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(keys, inner, max_size=3)
    ),
    max_leaves=10,
)


def storable(value: Any, depth: int = 0) -> bool:
    """Written independently: what every backend keeps (see the module under test)."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return len(str(abs(value))) <= 640
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list | tuple):
        return depth < MAX_DEPTH and all(storable(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return depth < MAX_DEPTH and all(
            storable(k, MAX_DEPTH) and storable(v, depth + 1) for k, v in value.items()
        )
    return False


@given(values)
def test_a_value_is_taken_exactly_when_every_backend_keeps_it(value: Any) -> None:
    try:
        text = check_json(value, "topic 't'", "payload")
    except PayloadError as exc:
        assert not storable(value), exc
        assert exc.subject == "topic 't'" and exc.path.startswith("payload")
        str(exc).encode()  # the message can be logged and stored
        return
    assert storable(value)
    assert text == json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


@given(values)
def test_a_topic_payload_is_what_its_json_reads_back_as(value: Any) -> None:
    if not storable(value):
        with pytest.raises(PayloadError):
            topic_payload(value, "t")
        return
    assert topic_payload(value, "t") == json.loads(json.dumps(value))


class Line(BaseModel):
    price: float = 0.0
    note: Any = None


class Order(BaseModel):
    lines: list[Line] = []
    extra: Any = None


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4), values)
def test_a_job_is_taken_exactly_when_its_json_fields_are_storable(
    prices: list[float], extra: Any
) -> None:
    try:
        order = Order(lines=[Line(price=p, note=extra) for p in prices], extra=extra)
        dumped = order.model_dump()
        order.model_dump(mode="json")
    except Exception:
        return  # pydantic itself cannot write it (bytes that are not UTF-8...): refused too
    try:
        payload = job_payload(order, "shop.Order")
    except PayloadError as exc:
        assert not storable(_json_types(dumped)), exc
        assert exc.subject == "job type 'shop.Order'" and exc.path.startswith("Order")
        return
    assert storable(_json_types(dumped))
    assert payload == order.model_dump(mode="json")


def _key_text(key: Any) -> Any:
    """A dict key as JSON writes it: a number key is written as its text (so an infinite float
    key is the storable string "inf"), a string key as itself."""
    return str(key) if isinstance(key, int | float) and not isinstance(key, bool) else key


def _json_types(value: Any) -> Any:
    """A Python-mode dump with sets, bytes and number keys as pydantic writes them (lists,
    strings, the key's text)."""
    if isinstance(value, dict):
        return {_key_text(k): _json_types(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_types(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value


@pytest.mark.parametrize(
    ("order", "message"),
    [
        (
            Order(lines=[Line(), Line(), Line(), Line(price=math.nan)]),
            "job type 'shop.Order': Order.lines[3].price is NaN, which is not JSON",
        ),
        (
            Order(extra={"a": [1, math.inf]}),  # pydantic would write it as null
            "job type 'shop.Order': Order.extra.a[1] is Infinity, which is not JSON",
        ),
        (
            Order(extra={None: math.inf}),  # pydantic writes the key as "None", the value as null
            "job type 'shop.Order': Order.extra[None] is Infinity, which is not JSON",
        ),
        (
            Order(lines=[Line(note={"k\ud800": 1})]),
            "job type 'shop.Order': Order.lines[0].note has a key with a lone surrogate "
            "('\\ud800' at index 1), which is not JSON: it has no UTF-8 encoding",
        ),
        (
            Order(extra={"big": -(10**641)}),
            "job type 'shop.Order': Order.extra.big is an integer of more than 640 digits, "
            "which not every backend reads back exactly",
        ),
        (
            Order(extra=object()),
            "job type 'shop.Order': Order.extra cannot be serialised: Unable to serialize "
            "unknown type: <class 'object'>",
        ),
    ],
)
def test_the_message_names_the_job_type_and_the_field(order: Order, message: str) -> None:
    with pytest.raises(PayloadError) as caught:
        job_payload(order, "shop.Order")
    assert str(caught.value) == message
    assert isinstance(caught.value, QueueyError) and isinstance(caught.value, ValueError)
    again = pickle.loads(pickle.dumps(caught.value))
    assert (again.subject, again.path, again.problem) == (
        caught.value.subject,
        caught.value.path,
        caught.value.problem,
    )


class Custom(BaseModel):
    when: int = 0

    @field_serializer("when")
    def _ser(self, value: int) -> Any:
        if value < 0:
            raise ValueError("no negative times")
        return {"t": float(value) if value else math.nan}


def test_a_custom_serializer_that_fails_or_returns_nan_is_named() -> None:
    with pytest.raises(PayloadError, match=r"^job type 'c': Custom.when cannot be serialised"):
        job_payload(Custom(when=-1), "c")
    with pytest.raises(PayloadError, match=r"^job type 'c': Custom.when.t is NaN"):
        job_payload(Custom(when=0), "c")
    assert job_payload(Custom(when=2), "c") == {"when": {"t": 2.0}}


def test_depth_and_cycles() -> None:
    nested: Any = 1
    for _ in range(MAX_DEPTH):
        nested = [nested]
    assert check_json(nested, "s", "payload")  # 100 levels: fine
    with pytest.raises(PayloadError, match=r"^s: payload(\[0\]){100} nests deeper than 100"):
        check_json([nested], "s", "payload")
    cycle: list[Any] = []
    cycle.append({"again": cycle})
    with pytest.raises(PayloadError, match=r"^s: payload\[0\]\.again contains itself"):
        check_json(cycle, "s", "payload")


async def test_publishing_a_topic_normalises_its_payload_on_memory() -> None:
    from queuey.topics import QueuesConfig, TopicPublisher

    backend = MemoryBackend()
    publisher = TopicPublisher(QueuesConfig(subscribe={"t.x": "f"}), backend)
    payload = {"tuple": (1, 2), 3: "x"}
    await publisher.publish("t.x", payload)
    (envelope,) = backend.pending_envelopes("t.x", "topic")
    assert envelope.payload == {"tuple": [1, 2], "3": "x"}
    with pytest.raises(PayloadError, match=r"^topic 't\.x': payload\.l\[1\] is NaN"):
        await publisher.publish(" t.x ", {"l": [0, math.nan]})
