"""A worker's (or topic subscriber's) own HTTP port: ``/live``, ``/ready`` and ``/metrics``.

- ``GET /live``: 200 ``live`` whenever the event loop answers (the app runs on the worker's own
  loop, so a blocked loop answers nothing and the probe times out).
- ``GET /ready``: 200 ``ready`` while the worker runs, pulls, is not shutting down and its
  backend is connected as far as it knows (``Engine.ready``); else 503 ``not ready``, and
  ``not ready: the postgresql backend is unreachable`` (``rabbitmq``...) while its backend
  noticed an outage.
- ``GET /metrics``: the Prometheus text exposition of the worker's ``Metrics`` (404 without).

Served with uvicorn inside the caller's loop (``HttpServer``), the ``http`` extra; the
metrics need the ``metrics`` extra.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from queuey._runtime.engine import Engine
from queuey.backends.base import Observable
from queuey.http.server import HttpServer

if TYPE_CHECKING:
    from queuey._runtime.metrics import Metrics

__all__ = ["HealthServer", "health_app"]


def health_app(engine: Engine) -> Starlette:
    """The ASGI app answering ``/live``, ``/ready`` and ``/metrics`` for ``engine`` (its
    ``metrics`` as they are when a scrape comes)."""

    async def live(request: Request) -> Response:
        return PlainTextResponse("live\n")

    async def ready(request: Request) -> Response:
        if engine.ready:
            return PlainTextResponse("ready\n")
        return PlainTextResponse(f"{_not_ready(engine)}\n", status_code=503)

    async def metrics(request: Request) -> Response:
        if engine.metrics is None:
            return PlainTextResponse("no metrics: give the worker a Metrics\n", status_code=404)
        return _exposition(engine.metrics)

    routes = [
        Route("/live", live, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    return Starlette(routes=routes)


def _not_ready(engine: Engine) -> str:
    """Why ``engine`` is not ready, when it is its backend's outage."""
    backend = engine.backend
    if isinstance(backend, Observable) and not backend.connected:
        return f"not ready: the {backend.messaging_system} backend is unreachable"
    return "not ready"


def _exposition(metrics: Metrics) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)


class HealthServer:
    """Serves ``health_app(engine)`` on ``host:port`` for the ``async with`` block::

        worker = Worker(AppQueues, backend, metrics=Metrics())
        async with HealthServer(worker, port=9090):
            await worker.run()

    Args:
        engine: the ``Worker`` or topic ``Subscriber``.
        host: the address to listen on (default ``0.0.0.0``: probes come from outside).
        port: the TCP port (0 picks a free one; see ``port`` once started).

    Raises:
        OSError: (on entering) the port cannot be bound.
    """

    def __init__(self, engine: Engine, *, host: str = "0.0.0.0", port: int = 9090) -> None:
        self._server = HttpServer(health_app(engine), host=host, port=port, log_level="warning")
        self._where = f"{host}:{port}"
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The port listened on (the one picked when 0 was given); 0 before it listens."""
        return self._server.port

    async def __aenter__(self) -> HealthServer:
        self._task = asyncio.create_task(self._server.run())
        while not self._server.started:
            if self._task.done():
                try:
                    await self._task
                except SystemExit:  # uvicorn's way of saying it cannot bind (logged why)
                    pass
                raise OSError(f"cannot serve health and metrics on {self._where}")
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
