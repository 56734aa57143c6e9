"""``GET {base}/jobs/{id}``: a job's state, progress and result as JSON, so a web client can
poll a job it started (the id ``enqueue`` returned, handed to it by the app).

Off by default: the route exists only when ``[queues] jobs`` grants access (the grammar of
``[queues] publish``: ``public``, ``authenticated``, ``role:ops``...); checked in the publish
endpoint's order: 404 the policy is private, 401 credentials missing or invalid, 403 wrong role
or organisation class; then 404 for an id that is not a UUID or no job, 503 with
``Retry-After`` when the backend is unreachable, else 200 with::

    {"id": str, "state": "pending" | "running" | "done" | "failed" | "cancelled",
     "queue": str, "job_type": str, "attempts": int, "due_at": ISO 8601 str (UTC),
     "progress": {"fraction": float, "done": int | null, "total": int | null,
                  "note": str | null} | null,
     "result": any, "last_error": str | null}

``result`` is a done job's stored result (``null`` before, or when its type declares none).
The payload is not shown.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import UTC
from typing import Any, get_args

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from queuey.backends.base import JobInfo, JobLookup, JobState
from queuey.errors import BackendError, BackendUnavailableError, ConfigError
from queuey.http.access import AccessPolicy

__all__ = ["JobsEndpoint", "job_document", "job_operation", "job_schema"]

_STATES = list(get_args(JobState))


def job_document(job: JobInfo) -> dict[str, Any]:
    """The JSON document of ``job`` (shape in the module docstring)."""
    return {
        "id": job.id,
        "state": job.state,
        "queue": job.queue,
        "job_type": job.job_type,
        "attempts": job.attempts,
        "due_at": job.due_at.astimezone(UTC).isoformat(),
        "progress": None if job.progress is None else asdict(job.progress),
        "result": job.result,
        "last_error": job.last_error,
    }


class JobsEndpoint:
    """Answers ``GET {base}/jobs/{id}`` from ``lookup``, once ``admit`` let the caller in."""

    def __init__(self, lookup: JobLookup, admit: Any, retry_after: int) -> None:
        self._lookup = lookup
        self._admit = admit
        self._retry_after = retry_after

    async def show(self, request: Request) -> Response:
        """The job's document, or an error (see the module docstring)."""
        await self._admit(request)
        raw = request.path_params["job_id"]
        try:
            job_id = str(uuid.UUID(raw))
        except ValueError:
            raise HTTPException(404, "no such job") from None
        try:
            job = await self._lookup.job(job_id)
        except ConfigError:
            raise HTTPException(404, "no such job") from None
        except BackendUnavailableError:
            detail = "the backend is unreachable, try again later"
            raise HTTPException(503, detail, {"Retry-After": str(self._retry_after)}) from None
        except BackendError:
            raise HTTPException(500, "the job could not be read") from None
        if job is None:
            raise HTTPException(404, "no such job")
        return JSONResponse(job_document(job), headers={"Cache-Control": "no-store"})


def job_operation(policy: AccessPolicy) -> dict[str, Any]:
    """The OpenAPI 3.1 operation of ``GET {base}/jobs/{id}`` (its ``security`` is set by the
    caller, from the jobs access policy ``policy``, stated in the description)."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    errors = {
        "401": "Credentials are missing or invalid",
        "403": "The caller lacks the role or organisation class",
        "404": "The id is not a UUID, or there is no such job (never enqueued here, or done "
        "and deleted by retention)",
        "500": "The job could not be read",
        "503": "The backend is unreachable: retry after the Retry-After header's seconds",
    }
    job = {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}
    responses: dict[str, Any] = {
        "200": {"description": "The job as it stands now (sent with no-store)", "content": job}
    }
    for status, description in errors.items():
        responses[status] = {"description": description, "content": error}
    return {
        "operationId": "getJob",
        "summary": "Read a job's state, progress and result",
        "description": (
            f"One job, by the id `enqueue` returned, so a web client can poll a job it started. "
            f"Access: `{policy}`. The payload is never shown."
        ),
        "parameters": [
            {
                "name": "job_id",
                "in": "path",
                "required": True,
                "description": "The job id (a UUID); anything else is 404",
                "schema": {"type": "string", "format": "uuid"},
            }
        ],
        "responses": responses,
    }


def job_schema() -> dict[str, Any]:
    """The JSON Schema of ``job_document``'s answer (``components.schemas.Job``)."""
    nullable_int = {"type": ["integer", "null"], "minimum": 0}
    progress = {
        "type": ["object", "null"],
        "description": "the last progress the handler reported (null when none)",
        "required": ["fraction", "done", "total", "note"],
        "properties": {
            "fraction": {"type": "number", "minimum": 0, "maximum": 1},
            "done": nullable_int,
            "total": nullable_int,
            "note": {"type": ["string", "null"]},
        },
    }
    return {
        "type": "object",
        "required": [
            "id",
            "state",
            "queue",
            "job_type",
            "attempts",
            "due_at",
            "progress",
            "result",
            "last_error",
        ],
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "state": {"type": "string", "enum": _STATES},
            "queue": {"type": "string"},
            "job_type": {"type": "string"},
            "attempts": {"type": "integer", "minimum": 0, "description": "runs started"},
            "due_at": {"type": "string", "format": "date-time", "description": "UTC"},
            "progress": progress,
            "result": {
                "description": "a done job's stored result (null before, or when its job type "
                "declares no result type)"
            },
            "last_error": {"type": ["string", "null"]},
        },
    }
