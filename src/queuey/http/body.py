"""The request body: read within a byte limit, then parsed as a JSON message.

The limit is enforced before the body is read in full: a declared ``Content-Length`` over it is
refused at once, and a streamed (chunked) body is counted as it arrives and abandoned as soon as
it passes the limit. An empty body is the message ``{}``. What JSON syntax allows but a message
cannot carry is refused here, as a 400, rather than failing later as a 500: ``NaN`` and
infinities (not JSON), lone surrogates (``"\\ud800"``: no UTF-8 encoding exists for them), and
nesting deeper than :data:`MAX_DEPTH`. ``\\u0000`` is kept: the message column is ``json``.
"""

from __future__ import annotations

import json
import re
from typing import NoReturn, TypeAlias

from starlette.requests import Request

from queuey.errors import QueueyError

__all__ = [
    "MAX_DEPTH",
    "BodyTooLargeError",
    "JsonValue",
    "MalformedBodyError",
    "parse_message",
    "read_body",
]

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"
"""A JSON document as ``json.loads`` returns it."""

MAX_DEPTH = 100
"""The deepest nesting of arrays and objects a message may have."""

_NOT_JSON = "the body is not valid JSON"
_DIGITS = re.compile(r"[0-9]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


class BodyTooLargeError(QueueyError):
    """The body is larger than the configured limit (answered 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is larger than {limit} bytes")
        self.limit = limit


class MalformedBodyError(QueueyError):
    """The body is not a JSON message that can be queued (answered 400)."""


async def read_body(request: Request, limit: int) -> bytes:
    """Read the request body, refusing it as soon as it is known to exceed ``limit``.

    Args:
        request: the request whose body is still unread.
        limit: the largest accepted body, in bytes.

    Returns:
        The whole body (``b""`` when there is none).

    Raises:
        BodyTooLargeError: the declared or received length exceeds ``limit``.
        MalformedBodyError: the ``Content-Length`` header is not a number.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        if not _DIGITS.fullmatch(declared.strip()):
            raise MalformedBodyError("the Content-Length header is not a number")
        if int(declared) > limit:
            raise BodyTooLargeError(limit)
    received = bytearray()
    async for chunk in request.stream():
        received += chunk
        if len(received) > limit:
            raise BodyTooLargeError(limit)
    return bytes(received)


def parse_message(body: bytes) -> JsonValue:
    """Parse a body into the message to publish.

    Args:
        body: the raw body; UTF-8 JSON of any kind (object, array, string, number...).

    Returns:
        The parsed value; ``{}`` for an empty body.

    Raises:
        MalformedBodyError: the body is not UTF-8 JSON, or holds what a message cannot carry
            (see the module docstring); the message says what, without quoting the body.
    """
    if not body:
        return {}
    try:
        value: JsonValue = json.loads(
            body.decode("utf-8"), parse_constant=_refuse_constant, parse_float=_finite_float
        )
    except UnicodeDecodeError:
        raise MalformedBodyError(f"{_NOT_JSON}: it is not UTF-8") from None
    except RecursionError:
        raise MalformedBodyError(f"{_NOT_JSON}: it nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise MalformedBodyError(f"{_NOT_JSON}: {exc}") from None
    _check_storable(value)
    return value


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise ValueError("a number is too large to store")
    return number


def _check_storable(value: JsonValue) -> None:
    pending: list[tuple[JsonValue, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            _check_string(item)
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise MalformedBodyError(f"{_NOT_JSON}: it nests deeper than {MAX_DEPTH} levels")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)


def _check_string(text: str) -> None:
    if _SURROGATE.search(text) is not None:
        raise MalformedBodyError(f"{_NOT_JSON}: a string contains a lone surrogate")
