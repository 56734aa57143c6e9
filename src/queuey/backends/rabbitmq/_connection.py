"""The backend's one AMQP connection, kept alive: reconnection with backoff, failover to the
next broker of a cluster, and the channel that declares hold queues (publishing over it is
``_publisher``).

``Link`` owns the connection. When the broker goes away (restart, network, forced close) a
watcher task reconnects with exponential backoff, runs the ``restore`` hook (the router's,
which re-declares the topology) on the new connection *before* anyone else may use it, and then
wakes everything waiting for it. Channels of the old connection are dead: a delivery taken
from one cannot be acknowledged any more (the broker redelivers it), and consumers open new
channels (see ``_consumer``).

An outage is one WARNING when the connection is lost and one INFO when it is back; the failed
attempts in between, and aiormq's own ERROR per failed connect or remote close, are DEBUG
records (``quiet_driver_logs``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import TypeVar

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractConnection
from aio_pika.exceptions import AMQPError, ChannelInvalidStateError

from queuey.backends._quiet import demote, templates
from queuey.backends.rabbitmq._errors import describe, password_of, redact, translated
from queuey.backends.rabbitmq._options import RabbitMqOptions
from queuey.backends.rabbitmq._urls import Brokers, with_heartbeat
from queuey.errors import BackendError, QueueyError, ShutDownError

__all__ = ["Link", "Restore", "quiet_driver_logs"]

log = logging.getLogger("queuey.rabbitmq")

T = TypeVar("T")
_RETRY_PAUSE = 0.05  # seconds between two tries of a publish whose connection died

Restore = Callable[[AbstractConnection], Awaitable[None]]
"""Run on every new connection before it is handed out (re-declares the topology)."""

_DRIVER_NOISE = (
    "error when creating transport",  # one per failed connect (the error is raised to us)
    "Unexpected connection close from remote",  # the broker closing us (restart, forced)
    "Cancelling cause reader exited abnormally",  # the socket dropped
    "Server connection %r was stuck",  # missed heartbeats
)


def quiet_driver_logs() -> None:
    """Make aiormq's per-connect and per-close records DEBUG records (queuey logs the outage
    once). Idempotent."""
    demote("aiormq.connection", templates(_DRIVER_NOISE), "queuey.rabbitmq")


class Link:
    """One AMQP connection that comes back after it is lost, to the same broker or, given a
    cluster's URLs, to the next node that answers.

    Args:
        urls: the AMQP URL, or several (see ``Brokers``); passwords are never logged.
        options: timeouts and backoff.

    Raises:
        ConfigError: a URL is not an AMQP URL.
    """

    def __init__(self, urls: str | Sequence[str], options: RabbitMqOptions) -> None:
        quiet_driver_logs()
        self.brokers = Brokers(urls)
        self._options = options
        self._connection: AbstractConnection | None = None
        self._ready = asyncio.Event()
        self._closed = False
        self._watcher: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()
        self._declarer: AbstractChannel | None = None
        self._channel_lock = asyncio.Lock()
        self.restore: Restore | None = None
        self.generation = 0

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    @property
    def safe_url(self) -> str:
        """The URL of the broker in use (or last tried), its password blanked."""
        return self.brokers.safe_url

    @property
    def _password(self) -> str | None:
        return self.brokers.password

    async def open(self) -> None:
        """Connect for the first time and start watching the connection.

        Raises:
            BackendError: the broker cannot be reached or refused the login.
        """
        connection = await self._connect()
        self._install(connection)
        self._watcher = asyncio.create_task(self._watch(), name="queuey-rabbitmq-link")

    async def close(self) -> None:
        """Stop reconnecting and close the connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._ready.set()  # wake waiters, who then see the link closed
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        connection, self._connection = self._connection, None
        if connection is not None and not connection.is_closed:
            with contextlib.suppress(Exception):
                await connection.close()

    async def connection(self, timeout: float | None = None) -> AbstractConnection:
        """The live connection, waiting up to ``timeout`` seconds (``None``: forever) for a
        reconnection in progress.

        Raises:
            ShutDownError: the link is closed.
            BackendError: still not connected after ``timeout``.
        """
        try:
            async with asyncio.timeout(timeout):
                while not self._closed:
                    connection = self._connection
                    if connection is not None and _alive(connection):
                        return connection
                    # lost, and the watcher has not noticed yet: it reconnects and sets ready
                    self._ready.clear()
                    await self._ready.wait()
        except TimeoutError:
            raise BackendError(
                f"not connected to {self.safe_url} (reconnecting for over {timeout:g}s)"
            ) from None
        raise ShutDownError("the RabbitMQ backend is closed")

    async def channel(self, timeout: float | None = None) -> AbstractChannel:
        """A new plain channel (no confirms) on the live connection.

        Raises:
            ShutDownError, BackendError: as for ``connection``, or the channel did not open.
        """
        connection = await self.connection(timeout)
        with translated("opening a channel", self._password):
            return await connection.channel(publisher_confirms=False)

    async def declarer(self) -> AbstractChannel:
        """The shared channel for on-demand declarations (hold queues), reopened if a failed
        declaration closed it. Waits as long as it takes: call it under ``bounded``."""
        async with self._channel_lock:
            if self._declarer is None or self._declarer.is_closed:
                connection = await self.connection()
                self._declarer = await connection.channel(publisher_confirms=False)
            return self._declarer

    async def again_after_reconnecting(self, step: Callable[[], Awaitable[T]], what: str) -> T:
        """Run ``step``; if the connection dies under it, run it again once the connection is
        back, as often as it takes. Call it under ``bounded``, whose deadline ends the waiting.

        Raises:
            Exception: whatever ``step`` raised other than a lost connection.
        """
        while True:
            used = self._connection
            try:
                return await step()
            except (ConnectionError, ChannelInvalidStateError) as exc:
                if not _lost(exc, used):
                    raise
            log.warning("connection lost while %s; trying again once it is back", what)
            await asyncio.sleep(_RETRY_PAUSE)

    @property
    def connected(self) -> bool:
        """Whether the connection is up, as far as the client knows."""
        connection = self._connection
        return connection is not None and _alive(connection)

    def translating(self, what: str) -> contextlib.AbstractContextManager[None]:
        """A block whose driver or socket failures become ``BackendError`` (``what`` first),
        the password blanked out, without a deadline of its own (see ``bounded``)."""
        return translated(what, self._password)

    async def _connect(self, after_loss: bool = False) -> AbstractConnection:
        """Connect to the first URL that answers, in ``Brokers.turn`` order.

        Raises:
            BackendError: none answered: the one URL's error, or every URL's.
        """
        errors: list[BackendError] = []
        for index in self.brokers.turn(after_loss):
            try:
                connection = await self._connect_to(self.brokers.urls[index])
            except BackendError as exc:
                errors.append(exc)
                continue
            self.brokers.current = index
            return connection
        if len(errors) == 1:
            raise errors[0]
        raise BackendError(
            f"none of the {len(errors)} brokers answered: " + "; ".join(map(str, errors))
        ) from errors[-1]

    async def _connect_to(self, url: str) -> AbstractConnection:
        what = f"connecting to {redact(url)}"
        with translated(what, password_of(url)):
            try:
                return await aio_pika.connect(
                    with_heartbeat(url, int(self._options.heartbeat.total_seconds())),
                    timeout=self._options.connect_timeout.total_seconds(),
                    client_properties={"connection_name": self._options.connection_name},
                )
            except AMQPError as exc:
                reason = _refusal(exc)
                if reason is None:
                    raise
                raise BackendError(f"{what}: the broker refused the connection: {reason}") from exc

    def _install(self, connection: AbstractConnection) -> None:
        lost = self._lost = asyncio.Event()
        # aio-pika resolves ``closed()`` only for a local close; a remote one (broker restart,
        # forced close, missed heartbeats) shows in the close callbacks.
        connection.close_callbacks.add(lambda _sender, _exc: lost.set())
        self._connection = connection
        self._declarer = None
        self.generation += 1
        self._ready.set()

    async def _watch(self) -> None:
        while not self._closed:
            await self._lost.wait()
            if self._closed:
                return
            self._ready.clear()
            log.warning("connection to %s lost; reconnecting", self.safe_url)
            await self._reconnect()

    async def _reconnect(self) -> None:
        wait = self._options.reconnect_initial.total_seconds()
        ceiling = self._options.reconnect_max.total_seconds()
        started, attempts = time.monotonic(), 0
        while not self._closed:
            attempts += 1
            try:
                connection = await self._connect(after_loss=True)
                await self._restore(connection)
            except Exception as exc:  # keep trying whatever went wrong; say so at DEBUG
                log.debug("could not reconnect (%s); next attempt in %.1fs", describe(exc), wait)
                await asyncio.sleep(wait)
                wait = min(ceiling, wait * 2)
                continue
            self._install(connection)
            seconds = time.monotonic() - started
            log.info("reconnected to %s (%d attempt(s), %.1fs)", self.safe_url, attempts, seconds)
            return

    async def _restore(self, connection: AbstractConnection) -> None:
        if self.restore is None:
            return
        # a broker that accepts the connection but never answers must not stall reconnection
        limit = (self._options.connect_timeout + self._options.publish_timeout).total_seconds()
        try:
            async with asyncio.timeout(limit):
                await self.restore(connection)
        except QueueyError as exc:
            if _alive(connection):  # the broker refused a declaration: say so, carry on
                log.error("re-declaring queues after reconnecting failed: %s", exc)
                return
            await _close_quietly(connection)
            raise
        except BaseException:
            await _close_quietly(connection)
            raise


async def _close_quietly(connection: AbstractConnection) -> None:
    with contextlib.suppress(Exception):
        await connection.close()


def _refusal(exc: BaseException) -> str | None:
    """The broker's reason for closing a connection while it opened (an unknown vhost, a
    vhost the user may not use), e.g. "NOT_ALLOWED - vhost nosuch not found" (530); ``None``
    when ``exc`` is not that.

    aiormq reports such a close as an unexpected ``Connection.Close`` frame and keeps the frame
    only in a local variable of the function that raised: it is read from the traceback.
    """
    if "Connection.Close" not in str(exc):
        return None
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame.f_locals.get("frame")
        text = getattr(frame, "reply_text", None)
        if isinstance(text, str) and text:
            return f"{text} ({getattr(frame, 'reply_code', '?')})"
        tb = tb.tb_next
    return "it closed the connection while it opened (does the vhost exist, may the user use it?)"


def _lost(exc: Exception, used: AbstractConnection | None) -> bool:
    """Whether ``exc``, raised by a step run on ``used``, means the connection died (run the
    step again once it is back), not that the channel alone was closed by an error of its
    own (``ChannelInvalidStateError`` on a connection still alive)."""
    if isinstance(exc, ChannelInvalidStateError):
        return used is None or not _alive(used)
    return True


def _alive(connection: AbstractConnection) -> bool:
    return not connection.is_closed and connection.connected.is_set()
