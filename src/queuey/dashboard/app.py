"""The dashboard as a Starlette app, mounted at ``<base>/dashboard`` beside the publish
endpoint (``publish_app(..., mounts=[dashboard_mount(...)])``) or served alone.

Routes, relative to the mount: ``/`` overview, ``/jobs`` job lists, ``/jobs/{id}`` a job,
``/workflows/{id}`` a workflow (by its id or a step's job id) drawn as a graph, ``/topics``
and ``/topics/{topic}`` publications, ``/audit`` the audit log, ``/schedules`` and
``/unique-keys`` (kept for features to come), ``/login``, ``/logout``, ``/actions/{action}``
and ``/static/{file}``. With ``view`` private every path answers 404, as the publish endpoint
does; a page asked for without a session sends the browser to ``/login``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from importlib import resources

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route

from queuey.backends.dashboard_store import DashboardStore
from queuey.dashboard.actions import Actions
from queuey.dashboard.config import DashboardConfig
from queuey.dashboard.guard import Guard
from queuey.dashboard.pages import Pages
from queuey.dashboard.session import SessionSigner
from queuey.dashboard.web import SECURITY_HEADERS, Templates
from queuey.errors import BackendError
from queuey.http.auth import Authenticator
from queuey.http.config import HttpConfig
from queuey.http.credentials import CredentialAuthenticator

__all__ = ["dashboard_app", "dashboard_mount", "dashboard_path"]

log = logging.getLogger("queuey.dashboard")

_STATIC = {"dashboard.css": "text/css", "dashboard.js": "text/javascript"}


def dashboard_path(http: HttpConfig) -> str:
    """Where the dashboard lives: ``<base>/dashboard``."""
    return f"{http.base}/dashboard"


def dashboard_mount(
    config: DashboardConfig,
    store: DashboardStore,
    http: HttpConfig,
    *,
    authenticator: Authenticator | None = None,
    app_prefix: str | None = None,
) -> Mount:
    """The dashboard as a route to add to the publish app (see ``dashboard_app``)."""
    app = dashboard_app(config, store, http, authenticator=authenticator, app_prefix=app_prefix)
    return Mount(dashboard_path(http), app=app)


def dashboard_app(
    config: DashboardConfig,
    store: DashboardStore,
    http: HttpConfig,
    *,
    authenticator: Authenticator | None = None,
    app_prefix: str | None = None,
) -> Starlette:
    """Build the dashboard app, to be mounted at ``dashboard_path(http)``.

    Args:
        config: the ``[dashboard]`` settings (who may view, who may act, sessions).
        store: the database reads and actions (opened on first use; the caller closes it).
        http: the ``[http]`` settings: the base path and the credentials accepted.
        authenticator: resolves credentials; by default bearer JWTs and API keys from ``http``.
        app_prefix: the topic app's prefix, offered for pausing as a whole; ``None`` for none.

    Returns:
        The app. Logs a warning when an access string closed its door unasked.
    """
    for name, policy in (("view", config.view), ("act", config.act)):
        if policy.problem is not None:
            log.warning("[dashboard] %s = %s; that door stays closed", name, policy.problem)
    path = dashboard_path(http)
    guard = Guard(
        config,
        authenticator or CredentialAuthenticator.from_config(http),
        SessionSigner(config.secret, config.session_hours * 3600),
        store,
    )
    templates = Templates(path)
    pages = Pages(store, guard, templates, app_prefix)
    actions = Actions(store, guard, templates)
    routes = [
        Route("/", pages.overview),
        Route("/jobs", pages.jobs),
        Route("/jobs/{job_id}", pages.job),
        Route("/workflows/{workflow_id}", pages.workflow),
        Route("/topics", pages.topics),
        Route("/topics/{topic}", pages.topic),
        Route("/audit", pages.audit),
        Route("/schedules", pages.schedules),
        Route("/limits", pages.limits),
        Route("/unique-keys", pages.unique_keys),
        Route("/login", actions.login_form, methods=["GET"]),
        Route("/login", actions.login, methods=["POST"]),
        Route("/logout", actions.logout, methods=["POST"]),
        Route("/actions/{action}", actions.act, methods=["POST"]),
        Route("/static/{name}", _static(guard)),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _error(guard, templates), BackendError: _unavailable},
    )
    app.router.redirect_slashes = False
    return app


def _static(guard: Guard) -> Callable[[Request], Awaitable[Response]]:
    async def serve(request: Request) -> Response:
        guard.require_enabled()
        name = request.path_params["name"]
        if name not in _STATIC:
            raise HTTPException(404, "not found")
        body = resources.files("queuey.dashboard").joinpath("static", name).read_bytes()
        headers = {**SECURITY_HEADERS, "Cache-Control": "max-age=3600"}
        return Response(body, media_type=_STATIC[name], headers=headers)

    return serve


def _error(
    guard: Guard, templates: Templates
) -> Callable[[Request, Exception], Awaitable[Response]]:
    async def handle(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if not guard.config.enabled:
            return PlainTextResponse("Not Found", status_code=404)
        sent_credential = "authorization" in request.headers or "x-api-key" in request.headers
        if exc.status_code == 401 and request.method == "GET" and not sent_credential:
            here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return templates.redirect(f"{templates.path}/login?next={_quote(here)}")
        context = {"status": exc.status_code, "message": exc.detail, "caller": None, "csrf": ""}
        return templates.page("error.html", context, status=exc.status_code)

    return handle


async def _unavailable(request: Request, exc: Exception) -> Response:
    log.error("dashboard: the database failed: %s", exc)
    return PlainTextResponse("the database is unavailable", status_code=503)


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")
