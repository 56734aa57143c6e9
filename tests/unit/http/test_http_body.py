"""Reading the body within the limit, and parsing it into a message a JSON column can store."""

from __future__ import annotations

import pytest
from starlette.requests import Request
from starlette.types import Message

from queuey.http.body import (
    MAX_DEPTH,
    BodyTooLargeError,
    JsonValue,
    MalformedBodyError,
    parse_message,
    read_body,
)


def nested(depth: int) -> JsonValue:
    value: JsonValue = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", {}),
        (b"{}", {}),
        (
            b'{"n": 42, "items": [1, 2.5, "x", null, true]}',
            {"n": 42, "items": [1, 2.5, "x", None, True]},
        ),
        (b"[1, 2]", [1, 2]),
        (b'"just a string"', "just a string"),
        (b"7", 7),
        (b"null", None),
        (b' \n {"a": 1} \n', {"a": 1}),
        ('{"caf\u00e9": "\u263a \U0001f600"}'.encode(), {"caf\u00e9": "\u263a \U0001f600"}),
        (b'{"e": "\\ud83d\\ude00"}', {"e": "\U0001f600"}),
        (b'{"a\\u0000": "\\u0000"}', {"a\x00": "\x00"}),
        (b"1" * 4000, int("1" * 4000)),
        (b"1e308", 1e308),
        (b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, nested(MAX_DEPTH)),
    ],
)
def test_valid_bodies(body: bytes, message: JsonValue) -> None:
    assert parse_message(body) == message


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b" ", "the body is not valid JSON: Expecting value"),
        (b"{", "the body is not valid JSON: Expecting property name"),
        (b"{'a': 1}", "the body is not valid JSON"),
        (b"order=42", "the body is not valid JSON"),
        (b'{"a": 1} x', "the body is not valid JSON: Extra data"),
        (b"\xff\xfe{}", "the body is not valid JSON: it is not UTF-8"),
        (b'"\xed\xa0\x80"', "the body is not valid JSON: it is not UTF-8"),
        (b"\xef\xbb\xbf{}", "the body is not valid JSON"),
        (b"NaN", "the body is not valid JSON: NaN is not a JSON value"),
        (b"[-Infinity]", "the body is not valid JSON: -Infinity is not a JSON value"),
        (b"1e999", "the body is not valid JSON: a number is too large to store"),
        (b"1" * 5000, "the body is not valid JSON"),
        (b'["\\ud800"]', "the body is not valid JSON: a string contains a lone surrogate"),
        (b'{"\\udfff": 1}', "the body is not valid JSON: a string contains a lone surrogate"),
        (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "nests deeper than 100 levels"),
        (b"[" * 100_000, "nests deeper than 100 levels"),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, "nests deeper than 100 levels"),
    ],
)
def test_bodies_a_json_column_cannot_hold_are_malformed(body: bytes, error: str) -> None:
    with pytest.raises(MalformedBodyError) as caught:
        parse_message(body)
    assert error in str(caught.value)


def streamed(chunks: list[bytes], headers: dict[str, str]) -> tuple[Request, list[int]]:
    """A request whose body arrives in ``chunks``; the list counts the chunks handed out."""
    handed: list[int] = []

    async def receive() -> Message:
        handed.append(1)
        index = len(handed) - 1
        more = index < len(chunks) - 1
        return {"type": "http.request", "body": chunks[index], "more_body": more}

    raw = [(name.encode(), value.encode()) for name, value in headers.items()]
    return Request({"type": "http", "method": "POST", "headers": raw}, receive), handed


async def test_a_body_within_the_limit_is_read_whole() -> None:
    request, _ = streamed([b"ab", b"cd", b""], {})
    assert await read_body(request, 4) == b"abcd"


async def test_a_declared_oversized_body_is_refused_unread() -> None:
    request, handed = streamed([b"x" * 10], {"content-length": "10"})
    with pytest.raises(BodyTooLargeError, match="the body is larger than 9 bytes"):
        await read_body(request, 9)
    assert handed == []


async def test_a_streamed_oversized_body_is_abandoned_at_the_limit() -> None:
    chunks = [b"x" * 4] * 100
    request, handed = streamed(chunks, {"transfer-encoding": "chunked"})
    with pytest.raises(BodyTooLargeError):
        await read_body(request, 10)
    assert len(handed) == 3


async def test_a_lying_content_length_is_still_counted() -> None:
    request, _ = streamed([b"x" * 8, b"x" * 8], {"content-length": "5"})
    with pytest.raises(BodyTooLargeError):
        await read_body(request, 10)


@pytest.mark.parametrize("declared", ["ten", "-1", "+5", "1_0", ""])
async def test_a_content_length_that_is_not_a_number(declared: str) -> None:
    request, _ = streamed([b""], {"content-length": declared})
    with pytest.raises(MalformedBodyError, match="Content-Length"):
        await read_body(request, 10)
