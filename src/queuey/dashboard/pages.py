"""The dashboard's pages (GET): overview, job lists, a job, topics, the audit log, and the
places kept for schedules and unique keys.

Each handler checks the caller (``Guard.caller``), runs one or two store reads (each served
by an index; see ``dashboard.sql``) and renders a template. Action buttons are rendered only
for callers who may act. The status message after an action comes from the ``done`` query
field, a value the dashboard signed (``SessionSigner.seal``): a link cannot make one up.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import groupby
from typing import Any
from uuid import UUID

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from queuey.attempts import MAX_ATTEMPT_ERRORS
from queuey.backends.dashboard_store import STATUSES, DashboardStore, JobFilter, TopicRow
from queuey.dashboard.chart import throughput_svg
from queuey.dashboard.graph import MAX_DRAWN, STATE_COLOURS, workflow_svg
from queuey.dashboard.guard import Caller, Guard
from queuey.dashboard.web import Templates, filter_query, job_filter, positive_int, pretty_json
from queuey.errors import ConfigError
from queuey.progress import stored_progress
from queuey.schedule import Timing

__all__ = ["Pages", "Publication"]

FLASH = "flash"
"""The purpose the status message after an action is sealed for."""
PAGE_SIZE = 50
UNIQUE_KEYS_SHOWN = 200
"""The Unique keys page lists at most this many keys (in key order)."""
TOPIC_ROWS = 200
STEPS_LISTED = 500
"""The workflow page lists at most this many steps (parents first)."""
DONE_MESSAGES = {
    "retry": "Retried {n} job(s): back to pending, due now.",
    "discard": "Discarded {n} job(s).",
    "cancel": "Cancelled {n} job(s) (a running one when its run ends).",
    "running": "The job still runs: nothing was done. Retry or discard it once its run ends.",
    "held": (
        "Another job holds this job's unique key: nothing was done (retrying it would run the "
        "key twice). Retry it once that job has ended, or discard it."
    ),
    "never-built": (
        "This job is a workflow step that never ran (a step before it failed, or it was "
        "cancelled while waiting): nothing was done. Retry the failed step its error names: "
        "this one then waits for it again (a step cancelled while waiting: enqueue its "
        "workflow again)."
    ),
    "cancel-workflow": (
        "Cancelled the workflow: {n} step(s) cancelled or, running, told to stop (each ends "
        "cancelled when its run does)."
    ),
    "bulk-retry": "Retried {n} failed job(s) matching the filter.",
    "bulk-discard": "Discarded {n} failed job(s) matching the filter.",
    "pause": "Paused.",
    "resume": "Resumed.",
    "limits": "Limits set: every worker applies them at its next claim.",
}


@dataclass(frozen=True)
class Publication:
    """One publish to a topic: its rows, one per subscriber (newest publication first)."""

    rows: list[TopicRow]

    @property
    def first(self) -> TopicRow:
        return self.rows[0]


class Pages:
    """The GET handlers, bound to one store.

    Args:
        store: the database reads.
        guard: access decisions.
        templates: rendering.
        app_prefix: the topic app this dashboard can pause as a whole, or ``None``.
    """

    def __init__(
        self, store: DashboardStore, guard: Guard, templates: Templates, app_prefix: str | None
    ) -> None:
        self.store, self.guard, self.templates = store, guard, templates
        self.app_prefix = app_prefix

    def _page(self, name: str, request: Request, caller: Caller, **context: Any) -> Response:
        csrf = caller.session.csrf if caller.session is not None else ""
        return self.templates.page(
            name,
            {"caller": caller, "csrf": csrf, "flash": self._flash(request), **context}
            | {"here": _here(request)},
        )

    def _flash(self, request: Request) -> str | None:
        """The status message of the signed ``done`` field, ``None`` without a valid one."""
        done = self.guard.signer.unseal(FLASH, request.query_params.get("done"))
        did, count = (done or {}).get("did"), (done or {}).get("n")
        if not isinstance(did, str) or did not in DONE_MESSAGES or not isinstance(count, int):
            return None
        return DONE_MESSAGES[did].format(n=count)

    async def overview(self, request: Request) -> Response:
        caller = await self.guard.caller(request)
        queues = await self.store.overview()
        paused = await self.store.paused()
        app_paused = any(p.kind == "app" and p.queue == self.app_prefix for p in paused)
        limits = {(s.kind, s.queue): s for s in await self.store.limits_set()}
        return self._page(
            "overview.html",
            request,
            caller,
            queues=queues,
            chart=throughput_svg(await self.store.throughput()),
            app_prefix=self.app_prefix,
            app_paused=app_paused,
            limits=limits,
        )

    async def jobs(self, request: Request) -> Response:
        caller = await self.guard.caller(request)
        where = job_filter(request.query_params)
        before = positive_int(request.query_params.get("before"), "before")
        page = await self.store.jobs(where, before=before, limit=PAGE_SIZE)
        older = None if page.before is None else filter_query(where, before=page.before)
        return self._page(
            "jobs.html",
            request,
            caller,
            where=where,
            page=page,
            older=older,
            statuses=STATUSES,
            tabs={status: filter_query(_with_status(where, status)) for status in STATUSES},
            queues=await self.store.queues(),
            query=filter_query(where),
        )

    async def job(self, request: Request) -> Response:
        caller = await self.guard.caller(request)
        try:
            job_id = str(UUID(request.path_params["job_id"]))
        except ValueError:
            raise HTTPException(404, "no such job") from None
        detail = await self.store.job(job_id)
        if detail is None:
            raise HTTPException(404, "no such job (it may have been discarded or pruned)")
        return self._page(
            "job.html",
            request,
            caller,
            job=detail,
            payload=pretty_json(detail.payload),
            headers=pretty_json(detail.headers),
            progress=stored_progress(detail.progress),
            result=None if detail.result is None else pretty_json(detail.result),
            fan_out=await self.store.fan_out(detail),
            max_attempt_errors=MAX_ATTEMPT_ERRORS,
            workflow_id=await self.store.workflow_of(job_id),
        )

    async def workflow(self, request: Request) -> Response:
        """A workflow (by its id or any step's job id): its steps as a graph, then listed."""
        caller = await self.guard.caller(request)
        try:
            workflow_id = str(UUID(request.path_params["workflow_id"]))
        except ValueError:
            raise HTTPException(404, "no such workflow") from None
        info = await self.store.workflow(workflow_id)
        if info is None:
            raise HTTPException(404, "no such workflow (its steps may have been pruned)")
        drawn = len(info.steps) <= MAX_DRAWN
        return self._page(
            "workflow.html",
            request,
            caller,
            info=info,
            graph=workflow_svg(info.steps, self.templates.path) if drawn else None,
            colours=STATE_COLOURS,
            steps=info.steps[:STEPS_LISTED],
            max_drawn=MAX_DRAWN,
        )

    async def topics(self, request: Request) -> Response:
        caller = await self.guard.caller(request)
        queues = [q for q in await self.store.overview() if q.kind == "topic"]
        return self._page("topics.html", request, caller, topics=queues)

    async def topic(self, request: Request) -> Response:
        caller = await self.guard.caller(request)
        topic = request.path_params["topic"]
        before = positive_int(request.query_params.get("before"), "before")
        rows = await self.store.publications(topic, before=before, limit=TOPIC_ROWS)
        publications, older = _publications(rows, full=len(rows) >= TOPIC_ROWS)
        paused = any(p.kind == "topic" and p.queue == topic for p in await self.store.paused())
        return self._page(
            "topic.html",
            request,
            caller,
            topic=topic,
            publications=publications,
            older=older,
            paused=paused,
        )

    async def audit(self, request: Request) -> Response:
        caller = await self.guard.caller(request)
        before = positive_int(request.query_params.get("before"), "before")
        entries = await self.store.audit(before=before, limit=PAGE_SIZE)
        older = entries[-1].id if len(entries) == PAGE_SIZE else None
        return self._page("audit.html", request, caller, entries=entries, older=older)

    async def schedules(self, request: Request) -> Response:
        caller = await self.guard.caller(request)
        rows = await self.store.schedules()
        now = datetime.now(UTC)
        upcoming = {row.name: _next_slot(row.expression, row.tz, now) for row in rows}
        return self._page("schedules.html", request, caller, rows=rows, upcoming=upcoming)

    async def limits(self, request: Request) -> Response:
        caller = await self.guard.caller(request)
        return self._page("limits.html", request, caller, queues=await self.store.flow_view())

    async def unique_keys(self, request: Request) -> Response:
        caller = await self.guard.caller(request)
        rows = await self.store.unique_keys(limit=UNIQUE_KEYS_SHOWN)
        full = len(rows) == UNIQUE_KEYS_SHOWN
        return self._page("unique_keys.html", request, caller, rows=rows, full=full)


def _next_slot(expression: str, tz: str, now: datetime) -> datetime | None:
    """The schedule's next slot after ``now``; ``None`` for a timing this version cannot read
    (written by a newer one)."""
    try:
        return Timing.parse(expression, tz).next_after(now)
    except ConfigError:
        return None


def _here(request: Request) -> str:
    """This page's path and query, without a status message (``done``)."""
    query = "&".join(p for p in request.url.query.split("&") if p and not p.startswith("done="))
    return request.url.path + (f"?{query}" if query else "")


def _with_status(where: JobFilter, status: str) -> JobFilter:
    return JobFilter(status, where.kind, where.queue, where.job_type, where.text)


def _publications(rows: list[TopicRow], *, full: bool) -> tuple[list[Publication], int | None]:
    """Rows grouped into publications (one publish: same time and publisher). When the read
    was cut (``full``) the oldest group may be partial: it is left for the next page."""
    groups = [
        Publication(sorted(group, key=lambda row: row.seq))
        for _, group in groupby(rows, key=lambda row: (row.created_at, row.published_by))
    ]
    if full and len(groups) > 1:
        groups.pop()
        return groups, min(row.seq for row in groups[-1].rows)
    return groups, (rows[-1].seq if full else None)
