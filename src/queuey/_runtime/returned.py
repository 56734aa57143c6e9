"""A handler's return value made a stored result: validated into its job's declared result type
and written as JSON text every backend stores alike (``_payload.check_json``).

Only jobs that declare a result type (``Job[Set, Result]``) come here; every other job's return
value is ignored at no cost.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from queuey._payload import check_json
from queuey.errors import NotSupportedError, PayloadError, ResultError

__all__ = [
    "first_error",
    "refuse_batch_transaction",
    "refuse_database_transaction",
    "refuse_transaction",
    "result_json",
    "type_name",
]


def result_json(adapter: TypeAdapter[Any], value: object, job_type: str, shown: str) -> str:
    """``value`` validated by ``adapter`` (the job's result type, ``shown`` by name) and
    written as compact JSON text.

    Raises:
        ResultError: ``value`` does not validate, cannot be written, is not JSON every
            backend stores alike, or its JSON does not read back as the type (validated once
            more, as a caller reads it); the message names ``job_type``, the type and the
            field.
    """
    subject = f"the result of {job_type}"
    try:
        valid = adapter.validate_python(value)
        dumped = adapter.dump_python(valid, mode="json")
    except ValidationError as exc:
        raise ResultError(f"{subject} is not a valid {shown}: {first_error(exc)}") from None
    except Exception as exc:  # a user's serializer may raise anything
        raise ResultError(f"{subject} could not be written as {shown}: {exc}") from None
    try:
        text = check_json(dumped, subject, "result")
    except PayloadError as exc:
        raise ResultError(str(exc)) from None
    if "\\u0000" in text and _holds_nul(dumped):
        raise ResultError(
            f"{subject} holds a NUL character (\\u0000) in a string: a result is stored as "
            "jsonb on PostgreSQL, which cannot hold one; remove or replace it"
        )
    try:  # what the caller reads back: a field left out of the dump, a value written as null
        adapter.validate_json(text)
    except ValidationError as exc:
        raise ResultError(
            f"{subject} was written as JSON that does not read back as {shown}: "
            f"{first_error(exc)} (a field excluded from the dump, or a value set without "
            "validation?)"
        ) from None
    return text


def _holds_nul(value: object) -> bool:
    """Whether a string anywhere in ``value`` (JSON values: dicts, lists, scalars) holds
    ``"\\x00"``, in a key or a value."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(key) or _holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False


def first_error(exc: ValidationError) -> str:
    """``exc``'s first error as ``"where: message (got <type of the value there>)"``, with how
    many more there are; a missing field names no type (there is no value)."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "the value"
    got = "" if first["type"] == "missing" else f" (got {type(first['input']).__name__})"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{got}{more}"


def type_name(result_type: object) -> str:
    """How an error names a result type: its ``__name__``, else its ``repr``."""
    return getattr(result_type, "__name__", None) or repr(result_type)


def refuse_transaction() -> Any:
    """``ctx.transaction()`` of a job that declares a result type.

    Raises:
        NotSupportedError: always: the transaction would complete the job before its handler
            returned the result to store with the completion.
    """

    raise NotSupportedError(
        "ctx.transaction() is not available to a job that declares a result type: the job "
        "completes with its result, which the handler has not returned yet; write in your own "
        "transaction and return the result"
    )


def refuse_database_transaction() -> Any:
    """``ctx.transaction()`` of a delivery that is no ``TransactionalDelivery`` (memory,
    RabbitMQ).

    Raises:
        NotSupportedError: always: only the PostgreSQL backend commits a job with the
            handler's own database transaction.
    """
    raise NotSupportedError(
        "ctx.transaction() needs the PostgreSQL backend; this backend has no database to "
        "commit a job with"
    )


def refuse_batch_transaction() -> Any:
    """``ctx.transaction()`` of a job run by a batch handler.

    Raises:
        NotSupportedError: always: each job of a batch completes with its own outcome once the
            batch handler returns.
    """
    raise NotSupportedError(
        "ctx.transaction() is not available in a batch handler: each job completes with its "
        "own outcome once the batch returns; write in your own transaction"
    )
