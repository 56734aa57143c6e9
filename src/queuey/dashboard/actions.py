"""The dashboard's actions (POST): sign in and out; retry and discard a failed (or cancelled)
job; cancel a pending, waiting or running one, or a whole workflow; bulk retry
and discard over a job-list filter; pause and resume a queue or the topic app.

An action is confirmed first: a form without ``confirm=yes`` answers with a page describing
what will happen and a button that sends it again, confirmed (no script needed). A bulk
action's page counts the failed jobs the filter matches and remembers their ids under a
random confirmation token for ``CONFIRM_SECS``; "Yes" acts on those jobs only (still failed),
never on one that matched later, and the token works once. A confirmed action is one
statement (change + audit row), then redirects back with what it did in a signed ``done``
field. Who may act, and the CSRF token, are checked before anything else
(``Guard.check_action``). Signing out records the session as ended for every process.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode, urlsplit
from uuid import UUID

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from queuey.backends.dashboard_store import ConfirmationGone, DashboardStore
from queuey.dashboard.guard import Caller, Guard, SignInRefused
from queuey.dashboard.pages import FLASH
from queuey.dashboard.session import COOKIE
from queuey.dashboard.web import Templates, job_filter, read_form
from queuey.errors import ConfigError
from queuey.limits import LimitSpec, parse_limit

__all__ = ["CONFIRM_SECS", "LOGIN_COOKIE", "Actions"]

CONFIRM_SECS = 600
"""How long a bulk action's confirmation page stays good for "Yes", in seconds."""
FLASH_SECS = 600
"""How long the status message link after an action shows it, in seconds."""
GONE = (
    "this confirmation was already used or is over 10 minutes old: "
    "go back and confirm the action again"
)

LOGIN_COOKIE = "queuey_dashboard_login"
"""Holds the sign-in form's CSRF token between showing the form and posting it."""
_KINDS = ("job", "topic", "app")


class Actions:
    """The POST handlers, bound to one store.

    Args:
        store: the database actions.
        guard: access decisions.
        templates: rendering.
    """

    def __init__(self, store: DashboardStore, guard: Guard, templates: Templates) -> None:
        self.store, self.guard, self.templates = store, guard, templates

    # -- signing in --------------------------------------------------------------------------

    async def login_form(self, request: Request, error: str | None = None) -> Response:
        self.guard.require_enabled()
        token = secrets.token_urlsafe(24)
        next_url = self.templates.local(request.query_params.get("next"))
        response = self.templates.page(
            "login.html",
            {"token": token, "next": next_url, "error": error},
            status=401 if error else 200,
        )
        response.set_cookie(
            LOGIN_COOKIE, token, max_age=600, path=self.templates.path, httponly=True,
            samesite="strict", secure=request.url.scheme == "https",
        )  # fmt: skip
        return response

    async def login(self, request: Request) -> Response:
        self.guard.require_enabled()
        form = await read_form(request)
        expected = request.cookies.get(LOGIN_COOKIE, "")
        if not expected or not secrets.compare_digest(form.get("token", ""), expected):
            raise HTTPException(403, "the sign-in form expired: reload it and sign in again")
        try:
            session = await self.guard.sign_in(form.get("credential", ""))
        except SignInRefused as exc:
            return await self.login_form(request, error=str(exc))
        response = self.templates.redirect(self.templates.local(form.get("next")))
        response.set_cookie(
            COOKIE, self.guard.signer.encode(session),
            max_age=max(int(session.expires - time.time()), 1), path=self.templates.path,
            httponly=True, samesite="strict", secure=request.url.scheme == "https",
        )  # fmt: skip
        response.delete_cookie(LOGIN_COOKIE, path=self.templates.path)
        return response

    async def logout(self, request: Request) -> Response:
        caller = await self.guard.caller(request)
        form = await read_form(request)
        if caller.session is not None and not caller.session.csrf_matches(form.get("csrf")):
            raise HTTPException(403, "the form is stale: reload the page and retry")
        if caller.session is not None:
            await self.guard.sign_out(caller.session)
        response = self.templates.redirect(self.templates.path + "/login")
        response.delete_cookie(COOKIE, path=self.templates.path)
        return response

    # -- acting ------------------------------------------------------------------------------

    async def act(self, request: Request) -> Response:
        caller = await self.guard.caller(request)
        form = await read_form(request)
        self.guard.check_action(caller, form.get("csrf"))
        name = request.path_params["action"]
        handlers: dict[str, Callable[[Caller, dict[str, str]], Awaitable[tuple[str, int]]]] = {
            "retry": self._retry,
            "discard": self._discard,
            "cancel": self._cancel,
            "cancel-workflow": self._cancel_workflow,
            "bulk-retry": self._bulk_retry,
            "bulk-discard": self._bulk_discard,
            "pause": self._pause,
            "resume": self._resume,
            "limits": self._limits,
        }
        handler = handlers.get(name)
        if handler is None:
            raise HTTPException(404, "no such action")
        back = self.templates.local(form.get("back"))
        if form.get("confirm") != "yes":
            return await self._confirm(caller, name, form, back)
        try:
            did, count = await handler(caller, form)
        except ConfirmationGone:
            raise HTTPException(409, GONE) from None
        done = self.guard.signer.seal(FLASH, {"did": did, "n": count}, FLASH_SECS)
        return self.templates.redirect(_with_result(back, done))

    async def _confirm(
        self, caller: Caller, name: str, form: dict[str, str], back: str
    ) -> Response:
        skipped = ("csrf", "confirm", "confirmation")
        fields = {key: value for key, value in form.items() if key not in skipped}
        where, count = None, None
        if name.startswith("bulk-"):
            where, token = job_filter(form), secrets.token_urlsafe(18)
            action = name.removeprefix("bulk-")
            count = await self.store.bulk_snapshot(caller.name, action, where, token, CONFIRM_SECS)
            fields["confirmation"] = token
        csrf = caller.session.csrf if caller.session is not None else ""
        context = {"action": name, "fields": fields, "where": where, "count": count, "csrf": csrf}
        return self.templates.page("confirm.html", {"caller": caller, "back": back, **context})

    async def _retry(self, caller: Caller, form: dict[str, str]) -> tuple[str, int]:
        job_id = _job_id(form)
        count = await self.store.retry(caller.name, job_id=job_id)
        return await self._refused("retry", job_id, count)

    async def _discard(self, caller: Caller, form: dict[str, str]) -> tuple[str, int]:
        job_id = _job_id(form)
        count = await self.store.discard(caller.name, job_id=job_id)
        return await self._refused("discard", job_id, count)

    async def _refused(self, did: str, job_id: str, count: int) -> tuple[str, int]:
        """``(did, count)``, or ``("running", 0)`` when nothing was done because the job still
        runs (a cancel asked for included: it stays running until its run ends), or
        ``("held", 0)`` when a retry was refused because another job holds its unique key, or
        ``("never-built", 0)`` when the job is a workflow step that never ran."""
        if count:
            return did, count
        detail = await self.store.job(job_id)
        if detail is not None and detail.status == "running":
            return "running", 0
        if did == "retry" and await self.store.key_holder(job_id) is not None:
            return "held", 0
        if did == "retry" and await self.store.never_built(job_id):
            return "never-built", 0
        return did, 0

    async def _cancel(self, caller: Caller, form: dict[str, str]) -> tuple[str, int]:
        return "cancel", await self.store.cancel(caller.name, _job_id(form))

    async def _cancel_workflow(self, caller: Caller, form: dict[str, str]) -> tuple[str, int]:
        done = await self.store.cancel_workflow(caller.name, _job_id(form))
        return "cancel-workflow", done.cancelled + done.requested

    async def _bulk_retry(self, caller: Caller, form: dict[str, str]) -> tuple[str, int]:
        where, token = job_filter(form), _confirmation(form)
        return "bulk-retry", await self.store.retry(caller.name, where=where, token=token)

    async def _bulk_discard(self, caller: Caller, form: dict[str, str]) -> tuple[str, int]:
        where, token = job_filter(form), _confirmation(form)
        return "bulk-discard", await self.store.discard(caller.name, where=where, token=token)

    async def _pause(self, caller: Caller, form: dict[str, str]) -> tuple[str, int]:
        kind, queue = _target(form)
        changed = await self.store.pause(caller.name, kind, queue)
        return "pause", int(changed)

    async def _limits(self, caller: Caller, form: dict[str, str]) -> tuple[str, int]:
        kind, queue = _target(form)
        if kind == "app":
            raise HTTPException(400, "kind: limits are set on a job queue or a topic")
        await self.store.set_limits(caller.name, kind, queue, _limits_of(form))
        return "limits", 1

    async def _resume(self, caller: Caller, form: dict[str, str]) -> tuple[str, int]:
        kind, queue = _target(form)
        changed = await self.store.resume(caller.name, kind, queue)
        return "resume", int(changed)


def _limits_of(form: dict[str, str]) -> list[LimitSpec] | None:
    """The limits the form sets: ``declared`` (``None``), ``none`` (``[]``), or limits spelt
    as ``parse_limit`` reads them, one per line or ``;``-separated."""
    text = form.get("limits", "").strip()
    if text in ("declared", ""):
        return None
    if text == "none":
        return []
    try:
        return [parse_limit(part) for part in re.split(r"[;\n]", text) if part.strip()]
    except ConfigError as exc:
        raise HTTPException(400, f"limits: {exc}") from None


def _job_id(form: dict[str, str]) -> str:
    try:
        return str(UUID(form.get("id", "")))
    except ValueError:
        raise HTTPException(400, "id: expected a job id (a UUID)") from None


def _target(form: dict[str, str]) -> tuple[str, str]:
    kind, queue = form.get("kind", ""), form.get("queue", "")
    if kind not in _KINDS or not queue or len(queue) > 200:
        raise HTTPException(400, "kind and queue: expected job, topic or app and a name")
    return kind, queue


def _confirmation(form: dict[str, str]) -> str:
    token = form.get("confirmation", "")
    if not token or len(token) > 64:
        raise HTTPException(400, "confirmation: send the bulk action from its confirmation page")
    return token


def _with_result(back: str, done: str) -> str:
    """``back`` with the signed status message ``done`` in place of any earlier one."""
    parts = urlsplit(back)
    kept = [p for p in parts.query.split("&") if p and not p.startswith("done=")]
    query = "&".join([*kept, urlencode({"done": done})])
    return f"{parts.path}?{query}"
