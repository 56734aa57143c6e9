"""What a message may carry: a JSON value that every backend stores and gives back alike,
checked once, before anything is written (one wire format on every backend: what one
backend would store, every other must too).

The memory backend keeps the value itself, PostgreSQL a ``json`` column, RabbitMQ the
envelope's JSON bytes. They agree on exactly the values ``check_json`` admits:

- ``None``, ``bool``, ``str``, ``int``, ``float``, ``list``/``tuple`` and ``dict``, as
  ``json.dumps`` writes them (a tuple is an array; a key that is an int, a float, a bool or
  ``None`` is written as a string). A typed job's payload is already that
  (``model_dump(mode="json")``); a topic's payload is replaced by the value its JSON reads back
  as, so every backend hands the subscriber the same thing;
- finite floats only: NaN and the infinities are not JSON (PostgreSQL's parser refuses them,
  pydantic writes them as ``null``);
- strings and keys without a lone surrogate (``"\\ud800"``): it has no UTF-8 encoding, so
  RabbitMQ cannot send it. ``"\\u0000"`` is fine: PostgreSQL's column is ``json``, not ``jsonb``;
- integers of at most ``MAX_INT_DIGITS`` (640) decimal digits, given back exactly by every
  backend. Python reads no longer integer in a process that lowered its limit
  (``sys.set_int_max_str_digits`` goes down to 640; the default is 4300);
- at most ``MAX_DEPTH`` (100) levels of arrays and objects: pydantic's reader stops at 200
  (the envelope counts), and the HTTP endpoint takes 100.

Anything else is a ``PayloadError`` naming what was enqueued or published and the path to the
first offending value in document order (``SendEmail.items[3].price``, ``payload.tags[0]``).

The check costs one C-speed ``json.dumps`` (for a typed job, whose fields pydantic already
turned into JSON types, pydantic-core's faster writer and a search of its output for ``NaN``
and ``Infinity``), a UTF-8 encode when the text is not ASCII, and two ``count`` calls when the
text is long; the value is walked (in Python) only when that fails or finds something, or a
long text might hide a nesting too deep or an integer too long.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json

from queuey.errors import PayloadError

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "check_json", "job_payload", "topic_payload"]

MAX_DEPTH = 100
"""The deepest nesting of arrays and objects a payload may have."""

MAX_INT_DIGITS = 640
"""The most decimal digits an integer of a payload may have."""

_INT_LIMIT = 10**MAX_INT_DIGITS
_LONG_NUMBER = re.compile(rf"[0-9]{{{MAX_INT_DIGITS + 1}}}")
_LONG_DIGITS = re.compile(rb"[0-9]{%d}" % (MAX_INT_DIGITS + 1))
_encode = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode
_NOT_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}

Problem = tuple[str, str]
"""Where the first offending value is, and what is wrong with it."""


def check_json(value: Any, subject: str, root: str) -> str:
    """The compact JSON text of ``value``, if every backend stores it alike.

    Args:
        value: the payload.
        subject: what it belongs to, for the error (``"job type 'app.SendEmail'"``).
        root: the name of ``value`` itself in a path (``"SendEmail"``, ``"payload"``).

    Returns:
        The JSON text (UTF-8 encodable, no NaN, compact separators).

    Raises:
        PayloadError: naming ``subject`` and the path to the first value that is not JSON
            every backend stores alike (see the module docstring).
    """
    try:
        text = _encode(value)
        if not text.isascii():
            text.encode("utf-8")  # strict: a lone surrogate fails here
    except (ValueError, TypeError, RecursionError) as exc:
        raise PayloadError(subject, *_refusal(value, root, exc)) from None
    if len(text) > 2 * MAX_DEPTH and _may_hide_a_problem(text):
        found = first_problem(value, root)
        if found is not None:
            raise PayloadError(subject, *found)
    return text


def job_payload(job: BaseModel, job_type: str) -> Any:
    """The payload of ``job``: its fields as JSON values (``model_dump(mode="json")``), checked.

    Args:
        job: the job.
        job_type: its name on the wire, for the error.

    Raises:
        PayloadError: a field's value cannot be serialised (a custom serializer failed or
            returned what pydantic cannot write), or is not JSON every backend stores alike;
            the message names the job type and the field (``SendEmail.items[3].price``).
    """
    root = type(job).__name__
    try:
        payload = job.model_dump(mode="json")
    except Exception as exc:  # a user's serializer may raise anything: name the field
        raise PayloadError(_subject(job_type), *_model_problem(job, root, exc)) from exc
    # ``payload`` holds only JSON types (dict, list, str, int, float, bool, None), so
    # pydantic-core's writer (a few times faster than the json module's) sees what json.dumps
    # would; it keeps NaN and the infinities as tokens, which are looked for in its output.
    try:
        data = to_json(payload, inf_nan_mode="constants")
    except Exception:  # a lone surrogate, say: the json module's check names it
        data = check_json(payload, _subject(job_type), root).encode()
    if (
        b"NaN" in data
        or b"Infinity" in data
        or (len(data) > 2 * MAX_DEPTH and _may_hide_a_problem(data))
    ):
        found = first_problem(payload, root)
        if found is not None:
            raise PayloadError(_subject(job_type), *found)
    if b"null" in data:  # pydantic writes a NaN it infers (an ``Any`` field) as null
        lost = _nan_written_as_null(job, payload, root)
        if lost is not None:
            raise PayloadError(_subject(job_type), *lost)
    return payload


def _subject(job_type: str) -> str:
    """What a job payload's ``PayloadError`` names: ``job type 'app.SendEmail'`` (built only
    when there is an error to raise: ``job_payload`` runs once per enqueued job)."""
    return f"job type {job_type!r}"


def topic_payload(payload: Any, topic: str) -> Any:
    """``payload`` as every backend gives it back: the value its JSON text reads back as (a
    tuple becomes a list, an int key a string), checked.

    Raises:
        PayloadError: naming the topic and the path inside the payload (``payload.items[0]``).
    """
    return json.loads(check_json(payload, f"topic {topic!r}", "payload"))


def first_problem(value: Any, path: str) -> Problem | None:
    """The first value inside ``value`` (in document order) that is not JSON every backend
    stores alike, as ``(path, problem)``; ``None`` when there is none.

    Args:
        value: the value to walk.
        path: the name of ``value`` itself, the start of every path returned.
    """
    return _walk(value, path, 0, set())


def _may_hide_a_problem(text: str | bytes) -> bool:
    """Whether a long JSON text may nest too deep or hold too long an integer."""
    if isinstance(text, bytes):
        if text.count(b"[") + text.count(b"{") > MAX_DEPTH:
            return True
        return len(text) > MAX_INT_DIGITS and _LONG_DIGITS.search(text) is not None
    if text.count("[") + text.count("{") > MAX_DEPTH:
        return True
    return len(text) > MAX_INT_DIGITS and _LONG_NUMBER.search(text) is not None


def _refusal(value: Any, root: str, exc: BaseException) -> Problem:
    found = first_problem(value, root)
    if found is not None:
        return found
    return root, f"cannot be written as JSON: {exc}"  # pragma: no cover - the walk finds it


def _walk(value: Any, path: str, depth: int, open_: set[int]) -> Problem | None:
    if value is None or value is True or value is False:
        return None
    if isinstance(value, str):
        problem = _string_problem(value)
        return None if problem is None else (path, f"is a string with {problem}")
    if isinstance(value, int):
        problem = _int_problem(value)
        return None if problem is None else (path, f"is {problem}")
    if isinstance(value, float):
        problem = _float_problem(value)
        return None if problem is None else (path, f"is {problem}")
    if isinstance(value, list | tuple | dict):
        if id(value) in open_:
            return path, "contains itself, which is not JSON"
        if depth >= MAX_DEPTH:
            return path, (
                f"nests deeper than {MAX_DEPTH} levels of arrays and objects, "
                "which not every backend reads back"
            )
        open_.add(id(value))
        try:
            if isinstance(value, dict):
                return _walk_object(value, path, depth, open_)
            for index, item in enumerate(value):
                found = _walk(item, f"{path}[{index}]", depth + 1, open_)
                if found is not None:
                    return found
            return None
        finally:
            open_.discard(id(value))
    return path, f"is of type {type(value).__qualname__}, which is not JSON"


def _walk_object(value: dict[Any, Any], path: str, depth: int, open_: set[int]) -> Problem | None:
    for key, item in value.items():
        problem = _key_problem(key)
        if problem is not None:
            return path, f"has a key {problem}"
        named = isinstance(key, str) and key.isidentifier()
        child = f"{path}.{key}" if named else f"{path}[{key!r}]"
        found = _walk(item, child, depth + 1, open_)
        if found is not None:
            return found
    return None


def _key_problem(key: Any) -> str | None:
    """What follows "has a key " in the error, or ``None`` for a key JSON writes faithfully."""
    problem: str | None = None
    if isinstance(key, str):
        problem = _string_problem(key)
        return None if problem is None else f"with {problem}"
    if key is None or isinstance(key, bool):
        return None
    if isinstance(key, int):
        problem = _int_problem(key)
    elif isinstance(key, float):
        problem = _float_problem(key)
    else:
        return f"of type {type(key).__qualname__}, which is not JSON (keys are strings)"
    return None if problem is None else f"that is {problem}"


def _string_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"a lone surrogate ({text[exc.start]!a} at index {exc.start}), "
            "which is not JSON: it has no UTF-8 encoding"
        )
    return None


def _int_problem(number: int) -> str | None:
    if -_INT_LIMIT < number < _INT_LIMIT:
        return None
    return (
        f"an integer of more than {MAX_INT_DIGITS} digits, "
        "which not every backend reads back exactly"
    )


def _float_problem(number: float) -> str | None:
    if math.isfinite(number):
        return None
    return f"{_NOT_FINITE[repr(float(number))]}, which is not JSON"


def _nan_written_as_null(job: BaseModel, payload: Any, root: str) -> Problem | None:
    """A non-finite float of ``job`` that ``model_dump(mode="json")`` silently wrote as
    ``None`` (pydantic's ``ser_json_inf_nan="null"`` for a value it infers, as in an ``Any``
    field), found by walking the Python-mode dump beside the JSON one."""
    try:
        python = job.model_dump()
    except Exception:  # a serializer that only works in JSON mode: nothing to compare
        return None
    return _lost(python, payload, root)


def _lost(python: Any, written: Any, path: str) -> Problem | None:
    if isinstance(python, float):
        problem = _float_problem(python)
        return (path, f"is {problem}") if problem is not None and written is None else None
    if isinstance(python, dict) and isinstance(written, dict):
        for key, item in python.items():
            text = next((t for t in _written_keys(key) if t in written), None)
            if text is None:
                continue  # a key pydantic wrote another way: not comparable
            counterpart = written[text]
            named = isinstance(key, str) and key.isidentifier()
            found = _lost(item, counterpart, f"{path}.{key}" if named else f"{path}[{key!r}]")
            if found is not None:
                return found
    elif isinstance(python, list | tuple | set | frozenset) and isinstance(written, list):
        if len(python) == len(written):
            for index, (item, counterpart) in enumerate(zip(python, written, strict=True)):
                found = _lost(item, counterpart, f"{path}[{index}]")
                if found is not None:
                    return found
    return None


def _key_text(key: Any) -> str:
    try:
        return json.dumps(key) if not isinstance(key, str) else key
    except (TypeError, ValueError):
        return str(key)


def _written_keys(key: Any) -> tuple[Any, ...]:
    """The keys under which ``model_dump(mode="json")`` may have written ``key``: itself, its
    JSON text (``true``, ``1.5``) or its ``str`` (``None``); pydantic writes a non-finite float
    key as ``"None"`` too."""
    if isinstance(key, float) and not math.isfinite(key):
        return (key, "None")
    return (key, _key_text(key), str(key))


def _model_problem(model: BaseModel, path: str, exc: BaseException) -> Problem:
    """The field of ``model`` whose serialisation fails (the deepest model field reached)."""
    for name in type(model).model_fields:
        try:
            model.model_dump(mode="json", include={name})
        except Exception as inner:
            value = getattr(model, name, None)
            if isinstance(value, BaseModel):
                return _model_problem(value, f"{path}.{name}", inner)
            found = _surrogate_in(value, f"{path}.{name}", 0)  # pydantic writes keys as UTF-8
            if found is not None:
                return found
            return f"{path}.{name}", f"cannot be serialised: {_first_line(inner)}"
    return path, f"cannot be serialised: {_first_line(exc)}"


def _surrogate_in(value: Any, path: str, depth: int) -> Problem | None:
    """The first string or key with a lone surrogate inside a field's Python value."""
    if depth > 2 * MAX_DEPTH:
        return None
    if isinstance(value, str):
        problem = _string_problem(value)
        return None if problem is None else (path, f"is a string with {problem}")
    if isinstance(value, BaseModel):
        value = {name: getattr(value, name, None) for name in type(value).model_fields}
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and (problem := _string_problem(key)) is not None:
                return path, f"has a key with {problem}"
            named = isinstance(key, str) and key.isidentifier()
            child = f"{path}.{key}" if named else f"{path}[{key!r}]"
            if (found := _surrogate_in(item, child, depth + 1)) is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (found := _surrogate_in(item, f"{path}[{index}]", depth + 1)) is not None:
                return found
    return None


def _first_line(exc: BaseException) -> str:
    try:
        lines = str(exc).strip().splitlines()
    except Exception:  # an exception whose text cannot be printed
        lines = []
    line = (lines[0] if lines else type(exc).__name__)[:300]
    return line.encode("utf-8", "backslashreplace").decode("utf-8")
