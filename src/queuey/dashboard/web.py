"""What every dashboard handler shares: templates, responses with security headers, forms,
and the job-list filter read from a query string or a form.

Templates are Jinja2 with autoescaping on for every template, so text from the database (a
payload, an error, a queue name) is always shown as text. Every response forbids framing and
inline scripts (``Content-Security-Policy``), so even a missed escape could not run a script.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from queuey.backends.dashboard_store import JobFilter

__all__ = [
    "SECURITY_HEADERS",
    "Templates",
    "filter_query",
    "job_filter",
    "positive_int",
    "pretty_json",
    "read_form",
]

MAX_FORM_BYTES = 16 * 1024
MAX_TEXT = 200
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class Templates:
    """The dashboard's templates, rendered into responses.

    Args:
        path: the dashboard's URL path (``<base>/dashboard``), given to every template as
            ``root`` for its links.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("queuey.dashboard", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.env.filters.update(when=_when, ago=_ago, count=_count)

    def page(self, name: str, context: Mapping[str, Any], status: int = 200) -> HTMLResponse:
        """Render ``name`` with ``context`` (plus ``root``) as an HTML response."""
        values = {"caller": None, "csrf": "", "flash": None, "here": self.path + "/", **context}
        html = self.env.get_template(name).render(root=self.path, **values)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def redirect(self, url: str) -> Response:
        """A 303 to ``url`` (a dashboard path)."""
        return RedirectResponse(url, status_code=303, headers=SECURITY_HEADERS)

    def local(self, url: str | None, default: str = "/") -> str:
        """``url`` when it is a path inside the dashboard, else the dashboard's ``default``
        page (no open redirect)."""
        if url:
            parts = urlsplit(url)
            inside = url == self.path or url.startswith(self.path + "/")
            if inside and not parts.scheme and not parts.netloc and "\\" not in url:
                return url
        return self.path + default


async def read_form(request: Request) -> dict[str, str]:
    """The request's ``application/x-www-form-urlencoded`` body (first value of each field).

    Raises:
        HTTPException: 413 over 16 KiB, 400 not UTF-8.
    """
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise HTTPException(413, "the form is too large")
    try:
        pairs = parse_qsl(body.decode(), keep_blank_values=True)
    except (UnicodeDecodeError, ValueError):
        raise HTTPException(400, "the form is not valid") from None
    form: dict[str, str] = {}
    for key, value in pairs:
        form.setdefault(key, value)
    return form


def job_filter(fields: Mapping[str, str]) -> JobFilter:
    """The job-list filter in a query string or form: ``status``, ``kind`` and ``queue``
    (both or neither), ``type``, ``q`` (text).

    Raises:
        HTTPException: 400 for a value that is not allowed.
    """
    text = fields.get("q", "").strip()
    kind, queue = fields.get("kind") or None, fields.get("queue") or None
    if "queue_ref" in fields:  # the filter form's one select: "kind:queue", "" for all
        ref_kind, _, ref_queue = fields["queue_ref"].partition(":")
        kind, queue = ref_kind or None, ref_queue or None
    if len(text) > MAX_TEXT:
        raise HTTPException(400, f"the filter text is longer than {MAX_TEXT} characters")
    try:
        return JobFilter(
            status=fields.get("status") or "failed",
            kind=kind,
            queue=queue,
            job_type=fields.get("type") or None,
            text=text,
        )
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None


def filter_query(where: JobFilter, **extra: object) -> str:
    """The query string that shows ``where`` (plus ``extra`` fields), for links."""
    fields: dict[str, object] = {"status": where.status}
    if where.kind is not None:
        fields |= {"kind": where.kind, "queue": where.queue}
    if where.job_type is not None:
        fields["type"] = where.job_type
    if where.text:
        fields["q"] = where.text
    fields |= {key: value for key, value in extra.items() if value is not None}
    return urlencode(fields)


def pretty_json(text: str) -> str:
    """Stored JSON text indented for reading (returned as stored when it does not parse)."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    except ValueError:
        return text


def positive_int(value: str | None, name: str) -> int | None:
    """``value`` as a positive integer, ``None`` when absent.

    Raises:
        HTTPException: 400 when it is not one.
    """
    if value is None or value == "":
        return None
    if not value.isdigit() or len(value) > 19:
        raise HTTPException(400, f"{name}: expected a positive whole number")
    return int(value)


def _when(value: datetime | None) -> str:
    return "—" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    whole = max(int(seconds), 0)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def _count(value: int, cap: int | None = None) -> str:
    return f"{value:,}+" if cap is not None and value >= cap else f"{value:,}"
