"""Read deadlines for slow clients: a request's headers, then its body, must arrive in time.

uvicorn bounds only the idle time between two requests on a kept-alive connection
(``timeout_keep_alive``); a client that sends a request's headers or body a byte at a time
holds its connection (and a task) for as long as it likes. ``HttpServer`` closes that door
with two deadlines:

- **headers**: from the moment a connection opens, or the previous response on it ends, the
  next request's headers must be complete within ``header_secs``. When they are not, a
  connection that received part of a request is answered ``408 Request Timeout``
  (``Connection: close``) and closed; one that received nothing is closed without a word.
- **body**: from the moment the headers are complete, the whole body must arrive within
  ``body_secs`` (a total, not a gap between reads, so a byte every few seconds does not
  stretch it). When it does not, the app's read is abandoned (what it would answer is
  dropped), the client gets ``408 Request Timeout`` (``Connection: close``) and the connection
  is closed; if the app had already started its response, the connection is only closed.

How: :func:`deadline_protocol` wraps uvicorn's own HTTP protocol class (h11 or httptools,
whichever uvicorn picks) so that each connection keeps a header timer, and :class:`BodyDeadline`
wraps the app. The two meet through a context variable: uvicorn starts a request's task from
the connection's ``data_received``, so the task sees the connection that received it.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["DEFAULT_BODY_SECS", "DEFAULT_HEADER_SECS", "BodyDeadline", "deadline_protocol"]

DEFAULT_HEADER_SECS = 10.0
"""How long a request's headers may take to arrive, in seconds, by default."""
DEFAULT_BODY_SECS = 30.0
"""How long a request's body may take to arrive after its headers, in seconds, by default."""


def _timeout_text(what: str, secs: float) -> bytes:
    return f"the request's {what} did not arrive within {secs:g} s; send it again\n".encode()


class _Connection(asyncio.Protocol):
    """One client connection: uvicorn's protocol inside, a header timer outside."""

    def __init__(self, inner: asyncio.Protocol, header_secs: float) -> None:
        self.inner, self.header_secs = inner, header_secs
        self.transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._partial = False  # bytes of a request arrived since the timer was armed
        self._active = 0  # requests whose headers are complete and whose response has not ended

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.inner.connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._timer is not None:
            self._partial = True
        token = _CONNECTION.set(self)
        try:
            self.inner.data_received(data)
        finally:
            _CONNECTION.reset(token)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def request_started(self) -> None:
        """A request's headers are complete: stop the header timer."""
        self._active += 1
        self._disarm()

    def request_ended(self) -> None:
        """A response ended: the next request's headers get a fresh timer."""
        self._active -= 1
        if self._active == 0 and self.transport is not None and not self.transport.is_closing():
            self._arm()

    def close(self) -> None:
        """Close the connection (after what was written is sent)."""
        self._disarm()
        if self.transport is not None:
            self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        self._partial = False
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.header_secs, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self._active or self.transport is None or self.transport.is_closing():
            return
        if self._partial:
            body = _timeout_text("headers", self.header_secs)
            head = (
                "HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
            )
            self.transport.write(head.encode() + body)
        self.close()


_CONNECTION: ContextVar[_Connection | None] = ContextVar("queuey_http_connection", default=None)
"""The connection whose ``data_received`` started the current request's task."""


def deadline_protocol(inner: type[asyncio.Protocol], header_secs: float) -> type[asyncio.Protocol]:
    """A uvicorn HTTP protocol class: ``inner`` (uvicorn's own) with the header deadline.

    Args:
        inner: the protocol class uvicorn would use (its ``http_protocol_class``).
        header_secs: how long a request's headers may take, in seconds (> 0).
    """

    class DeadlineProtocol(_Connection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(inner(*args, **kwargs), header_secs)

    return DeadlineProtocol


class BodyDeadline:
    """ASGI middleware: the request body must arrive within ``body_secs`` of its headers.

    Only requests served through :func:`deadline_protocol` connections are bounded (others,
    such as an in-process test client, pass through untouched).

    Args:
        app: the app to wrap.
        body_secs: how long the whole body may take, in seconds (> 0).
    """

    def __init__(self, app: ASGIApp, body_secs: float) -> None:
        self.app, self.body_secs = app, body_secs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = _CONNECTION.get()
        if scope["type"] != "http" or connection is None:
            await self.app(scope, receive, send)
            return
        connection.request_started()
        try:
            await _Bounded(connection, receive, send, self.body_secs).run(self.app, scope)
        finally:
            connection.request_ended()


class _BodyTimedOut(Exception):
    """The body did not arrive in time (raised into the app from its ``receive``)."""


class _Bounded:
    """One request: its ``receive`` bounded until the body is complete."""

    def __init__(self, connection: _Connection, receive: Receive, send: Send, secs: float) -> None:
        self.connection, self._receive, self._send, self.secs = connection, receive, send, secs
        self.deadline = asyncio.get_running_loop().time() + secs
        self.body_done = self.timed_out = self.started = False

    async def run(self, app: ASGIApp, scope: Scope) -> None:
        try:
            await app(scope, self.receive, self.send)
        except Exception:
            if not self.timed_out:
                raise
        if self.timed_out:
            await self._answer_timeout()

    async def receive(self) -> Message:
        if self.body_done:
            return await self._receive()
        remaining = self.deadline - asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(max(remaining, 0.0)):
                message = await self._receive()
        except TimeoutError:
            self.timed_out = True
            raise _BodyTimedOut from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.body_done = True
        return message

    async def send(self, message: Message) -> None:
        if self.timed_out:
            return  # the app's answer to a body that never came is dropped
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)

    async def _answer_timeout(self) -> None:
        if not self.started:
            body = _timeout_text("body", self.secs)
            headers = [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]
            await self._send({"type": "http.response.start", "status": 408, "headers": headers})
            await self._send({"type": "http.response.body", "body": body})
        self.connection.close()
