"""Translation of aio-pika / aiormq exceptions into queuey's, at the backend's boundary,
and redaction of credentials from anything we log or raise.

No AMQP exception escapes the RabbitMQ backend: ``translated`` re-raises it as a
``BackendError`` (``from`` the original), with a message that never contains the password.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import unquote, urlsplit, urlunsplit

from aio_pika.exceptions import (
    AMQPError,
    ChannelPreconditionFailed,
    DeliveryError,
    PublishError,
)

from queuey.errors import BackendError, QueueyError

__all__ = [
    "UnroutableError",
    "declaring",
    "describe",
    "password_of",
    "precondition_message",
    "type_switch",
    "redact",
    "translated",
]

_INEQUIVALENT = re.compile(r"inequivalent arg '([^']+)' for queue '([^']+)'")
_QUORUM_ONLY = ("x-queue-type", "x-delivery-limit", "x-dead-letter-strategy", "x-overflow")
_MIGRATION = (
    "RabbitMQ cannot change a queue's type. Move its messages first (docs: Running on a "
    "cluster, switching queue types): stop the producers, let the old workers drain it, delete "
    "it with its .dead and .hold.* queues, then declare it again; or declare the new queues in "
    "a new vhost and drain the old one there"
)


class UnroutableError(BackendError):
    """The broker returned a mandatory publish: no queue of that name exists (any more)."""


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and logs)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
    except ValueError:
        return "<unparseable AMQP URL>"
    userinfo, _, hostinfo = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hostinfo}"))


def password_of(url: str) -> str | None:
    """The password in ``url`` as the driver sees it (percent-decoded), if any."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return None if password is None else unquote(password)


def describe(exc: BaseException) -> str:
    """A one-line description of a driver exception: the broker's reply text when there is
    one, else the exception's text, else its class name."""
    if isinstance(exc, AMQPError) and exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return str(exc) or type(exc).__name__


def precondition_message(exc: ChannelPreconditionFailed) -> str:
    """What to tell the user when the broker refuses a queue declaration as inequivalent.

    Adding ``x-max-priority`` to an existing queue is the common case: the queue must be
    drained and deleted, or ``max_priority`` set to 0.
    """
    text = describe(exc)
    match = _INEQUIVALENT.search(text)
    if match is None:
        return f"the broker refused the declaration: {text}"
    argument, queue = match.groups()
    if argument == "x-max-priority":
        return (
            f"queue {queue!r} already exists with a different x-max-priority ({text}). "
            "RabbitMQ cannot change a queue's priority levels: drain and delete the queue, "
            "then declare it again, or set max_priority=0 (or its current value) in its Queue"
        )
    return (
        f"queue {queue!r} already exists with a different {argument} ({text}). "
        "RabbitMQ cannot change a queue's arguments: drain and delete the queue, or declare "
        "it with its current options"
    )


def type_switch(exc: ChannelPreconditionFailed, quorum: bool) -> str | None:
    """The message for a refusal that means an existing queue is of the other type (classic
    when declaring a quorum queue, or the reverse), naming the queue and the migration path;
    ``None`` for any other refusal.

    Args:
        exc: the broker's refusal of a declaration.
        quorum: whether a quorum queue was being declared.
    """
    text = describe(exc)
    match = _INEQUIVALENT.search(text)
    if match is None:
        return None
    argument, queue = match.groups()
    current_none = text.rstrip().endswith("current is none")
    if quorum and (argument == "x-max-priority" or (argument in _QUORUM_ONLY and current_none)):
        return f"queue {queue!r} exists as a classic queue, not a quorum queue ({text}). " + (
            _MIGRATION
        )
    if not quorum and argument in _QUORUM_ONLY and not current_none:
        return f"queue {queue!r} exists as a quorum queue, not a classic queue ({text}). " + (
            _MIGRATION
        )
    return None


@contextmanager
def declaring(what: str, quorum: bool) -> Iterator[None]:
    """A refusal inside the block that means the queue exists as the other type (see
    ``type_switch``) becomes a ``BackendError`` saying so, naming the queue and what to do;
    everything else passes through untouched (wrap it in ``translated`` as well).

    Raises:
        BackendError: the queue exists as the other type.
    """
    try:
        yield
    except ChannelPreconditionFailed as exc:
        switch = type_switch(exc, quorum)
        if switch is None:
            raise
        raise BackendError(f"{what}: {switch}") from exc


@contextmanager
def translated(what: str, secret: str | None = None) -> Iterator[None]:
    """Re-raise any driver or socket failure inside the block as ``BackendError``.

    Args:
        what: what was being done, the start of the message ("publishing to 'q'").
        secret: a password to blank out of the message, if one might appear in it.

    Raises:
        BackendError: for an AMQP error, an ``OSError`` or a timeout; queuey's own errors
            pass through unchanged.
    """
    try:
        yield
    except QueueyError:
        raise
    except ChannelPreconditionFailed as exc:
        raise BackendError(f"{what}: {_blank(precondition_message(exc), secret)}") from exc
    except PublishError as exc:
        raise UnroutableError(
            f"{what}: the broker returned the message as unroutable (no such queue)"
        ) from exc
    except DeliveryError as exc:
        raise BackendError(f"{what}: the broker refused the message (negative confirm)") from exc
    except TimeoutError as exc:
        raise BackendError(f"{what}: timed out") from exc
    except (AMQPError, OSError, RuntimeError) as exc:
        raise BackendError(f"{what}: {_blank(describe(exc), secret)}") from exc


def _blank(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text
