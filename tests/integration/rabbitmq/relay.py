"""A TCP relay in front of the test broker that a test can cut, so a backend sees its broker
become unreachable without anyone stopping the shared RabbitMQ."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit


class Relay:
    """Forwards ``127.0.0.1:<port>`` to the broker of ``url`` until told otherwise.

    - ``blackhole()``: every connection stays open but nothing passes either way, and new ones
      are accepted and never answered (a broker that stopped answering);
    - ``refuse()``: every connection is reset and the port is closed (a broker that is down);
    - ``drop()``: every connection is reset, new ones are forwarded again (a network blip).
    """

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._url = parts
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5672)
        self._mode = "forward"
        self._server: asyncio.Server | None = None
        self._transports: set[asyncio.BaseTransport] = set()
        self.port = 0

    @property
    def url(self) -> str:
        """The broker's URL, through the relay."""
        userinfo = self._url.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        return urlunsplit(self._url._replace(netloc=netloc))

    async def start(self) -> Relay:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def blackhole(self) -> None:
        self._mode = "blackhole"

    def refuse(self) -> None:
        self._mode = "refuse"
        if self._server is not None:
            self._server.close()
        self._reset_all()

    def drop(self) -> None:
        self._reset_all()

    def _reset_all(self) -> None:
        for transport in list(self._transports):
            with contextlib.suppress(Exception):
                transport.abort()  # type: ignore[attr-defined]
        self._transports.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._transports.add(writer.transport)
        if self._mode != "forward":
            await self._pipe(reader, None)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._transports.add(up_writer.transport)
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None
    ) -> None:
        try:
            while data := await reader.read(65536):
                if self._mode == "forward" and writer is not None:
                    writer.write(data)
                    await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.transport.abort()
