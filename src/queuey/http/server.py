"""Serving an ASGI app with uvicorn inside the caller's event loop.

uvicorn's own ``serve()`` installs SIGINT/SIGTERM handlers and re-raises the signal when it is
done, which would skip the caller's clean-up (closing the backend). ``HttpServer`` leaves
signals to the caller: ``queuey serve`` stops it with ``shutdown()`` from its own handler.

Slow clients are bounded (``queuey.http.deadlines``): a request's headers must arrive within
``header_timeout_secs`` of the connection opening (or of the previous response), and its body
within ``body_timeout_secs`` of the headers; past either, the client gets ``408 Request
Timeout`` and the connection is closed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TypedDict

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from queuey._validation import check_float
from queuey.http.config import HttpConfig
from queuey.http.deadlines import (
    DEFAULT_BODY_SECS,
    DEFAULT_HEADER_SECS,
    BodyDeadline,
    deadline_protocol,
)

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "HttpServer", "ReadTimeouts", "timeouts"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


class ReadTimeouts(TypedDict):
    """``HttpServer``'s read timeouts, in seconds."""

    header_timeout_secs: float
    body_timeout_secs: float


def timeouts(config: HttpConfig) -> ReadTimeouts:
    """The read timeouts of ``config`` as ``HttpServer`` keyword arguments."""
    return ReadTimeouts(
        header_timeout_secs=config.header_timeout_secs,
        body_timeout_secs=config.body_timeout_secs,
    )


class _QuietServer(uvicorn.Server):
    """A uvicorn server that does not touch signal handlers."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    """An ASGI app listening on ``host:port`` until :meth:`shutdown`.

    Logging goes through the standard ``logging`` tree (uvicorn's own configuration is not
    installed): ``uvicorn.error`` says where it listens, ``uvicorn.access`` logs each request
    line (method, path, status; never headers).

    Args:
        app: the ASGI app to serve.
        host: the address to listen on (loopback by default).
        port: the TCP port.
        log_level: the level of uvicorn's loggers (e.g. ``"info"``), or ``None`` to leave them
            to the logging configuration.
        header_timeout_secs: how long a request's headers may take to arrive, in seconds.
        body_timeout_secs: how long a request's body may take after its headers, in seconds.

    Raises:
        ConfigError: a timeout that is not a positive number.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        log_level: str | None = None,
        header_timeout_secs: float = DEFAULT_HEADER_SECS,
        body_timeout_secs: float = DEFAULT_BODY_SECS,
    ) -> None:
        header_secs = check_float(header_timeout_secs, "header_timeout_secs", positive=True)
        body_secs = check_float(body_timeout_secs, "body_timeout_secs", positive=True)
        config = uvicorn.Config(
            BodyDeadline(app, body_secs),
            host=host,
            port=port,
            lifespan="off",
            log_config=None,
            log_level=log_level,
            http=deadline_protocol(AutoHTTPProtocol, header_secs),
            ws="none",
        )
        self._server = _QuietServer(config)

    @property
    def started(self) -> bool:
        """Whether the server is listening."""
        return self._server.started

    @property
    def port(self) -> int:
        """The port listened on (the one the system picked when 0 was given); 0 before."""
        for server in getattr(self._server, "servers", []):
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return 0

    async def run(self) -> None:
        """Listen and serve until :meth:`shutdown`, then finish in-flight requests.

        Raises:
            SystemExit: the address cannot be bound (uvicorn logs why).
        """
        await self._server.serve()

    def shutdown(self, force: bool = False) -> None:
        """Ask :meth:`run` to stop; safe to call before it starts or more than once.

        Args:
            force: stop without waiting for in-flight requests and open connections.
        """
        self._server.should_exit = True
        if force:
            self._server.force_exit = True
