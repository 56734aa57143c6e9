"""A TCP proxy for tests that simulate a server outage without touching the shared server:
``cut`` drops every connection through it and refuses new ones, as a restart does, until
``start`` listens again on the same port; ``black_hole`` keeps every connection open but
holds the bytes sent either way (new connections are accepted and held too), as a network
partition or a frozen server does, until ``forward`` delivers them (as TCP does once the
partition heals)."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit

__all__ = ["Proxy", "through"]


class Proxy:
    """Forwards TCP connections from a local port (``port``, chosen by the first ``start``) to
    ``host:port``; ``cut`` drops them all and refuses new ones until ``start`` again;
    ``black_hole`` holds every byte (connections stay open) until ``forward``."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        self._flowing = asyncio.Event()
        self._flowing.set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def black_hole(self) -> None:
        """Stop forwarding: bytes read from either side are held, nothing is closed."""
        self._flowing.clear()

    def forward(self) -> None:
        """Forward again, the held bytes first."""
        self._flowing.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()
        writer.transport.abort()


def through(url: str, port: int) -> str:
    """``url`` pointing at 127.0.0.1:``port``."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    return urlunsplit(
        parts._replace(netloc=f"{user}@127.0.0.1:{port}" if user else f"127.0.0.1:{port}")
    )
