"""The OpenAPI 3.1 description of the HTTP endpoint, served at ``GET {base}/openapi.json``.

It describes the routes that exist: ``POST {base}/queues/{topic}`` (unless publishing is
private) and ``GET {base}/jobs/{job_id}`` (when ``[queues] jobs`` grants access), each with the
security its own access policy asks for, and the security schemes the configuration accepts, so
a client generator can call the endpoint. A route that does not exist is not described, and
with neither the document is not served.
"""

from __future__ import annotations

from typing import Any

from queuey.http.access import AccessPolicy, Level
from queuey.http.config import HttpConfig
from queuey.http.jobs import job_operation, job_schema
from queuey.topics.publisher import TOPIC_MAX_PRIORITY

__all__ = ["TOPIC_PATTERN", "openapi_document"]

TOPIC_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"
"""The topic rule as a regular expression: 1..200 ASCII letters, digits, ``.``, ``_``, ``-``
or ``:``."""

_ERROR = {"$ref": "#/components/schemas/Error"}


def openapi_document(
    config: HttpConfig,
    policy: AccessPolicy,
    *,
    version: str,
    jobs_access: AccessPolicy | None = None,
) -> dict[str, Any]:
    """The OpenAPI document for the endpoint.

    Args:
        config: supplies the base path, the body limit and the accepted credentials.
        policy: who may publish, stated in the description; private: the publish route is
            not described.
        version: the ``info.version`` to report (queuey's version).
        jobs_access: who may read jobs (``[queues] jobs``); ``None`` or private: the
            ``GET {base}/jobs/{job_id}`` route is not described.

    Returns:
        The document as a JSON-ready dict. The document-level ``security`` is the publish
        route's (``[]`` when it is not described); the jobs route carries its own.
    """
    schemes = _security_schemes(config)
    paths: dict[str, Any] = {}
    if not policy.is_private:
        paths[f"{config.base}/queues/{{topic}}"] = {"post": _operation(config, policy)}
    schemas = _schemas()
    if jobs_access is not None and not jobs_access.is_private:
        reading = job_operation(jobs_access)
        reading["security"] = _requirements(schemes, jobs_access)
        paths[f"{config.base}/jobs/{{job_id}}"] = {"get": reading}
        schemas["Job"] = job_schema()
    return {
        "openapi": "3.1.0",
        "info": {"title": "queuey", "version": version},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": schemes},
        "security": [] if policy.is_private else _requirements(schemes, policy),
    }


def _requirements(schemes: dict[str, Any], policy: AccessPolicy) -> list[dict[str, list[str]]]:
    """Any one of ``schemes``; also none (``{}``) when ``policy`` admits anonymous callers."""
    requirements: list[dict[str, list[str]]] = [{name: []} for name in schemes]
    if policy.level is Level.PUBLIC and policy.org_class is None:
        requirements.append({})
    return requirements


def _operation(config: HttpConfig, policy: AccessPolicy) -> dict[str, Any]:
    return {
        "operationId": "publish",
        "summary": "Publish a message to a topic",
        "description": (
            f"Records the JSON body once per subscriber of the topic. Access: `{policy}`. "
            f"An empty body publishes `{{}}`; bodies over {config.max_body_bytes} bytes are "
            "refused."
        ),
        "parameters": [
            {
                "name": "topic",
                "in": "path",
                "required": True,
                "description": (
                    "Everything after `/queues/`, trimmed; a slash in it (encoded or not) makes "
                    "it a bad topic (400)"
                ),
                "schema": {"type": "string", "pattern": TOPIC_PATTERN},
            },
            {
                "name": "priority",
                "in": "query",
                "required": False,
                "description": (
                    "Higher is handled first (default 0); also accepted as the "
                    "`X-Queuey-Priority` header, which this parameter overrides"
                ),
                "schema": {"type": "integer", "minimum": 0, "maximum": TOPIC_MAX_PRIORITY},
            },
            {
                "name": "X-Queuey-Priority",
                "in": "header",
                "required": False,
                "description": "The priority, when the `priority` query parameter is absent",
                "schema": {"type": "integer", "minimum": 0, "maximum": TOPIC_MAX_PRIORITY},
            },
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "description": (
                    "Makes a retried request safe: the same key within the app's "
                    "`idempotency_hours` (default 24) writes nothing and answers 200 with the "
                    "first publication; the same key with another topic or body is 409. A "
                    "token or a quoted string of 1 to 255 visible ASCII characters."
                ),
                "schema": {"type": "string", "minLength": 1, "maxLength": 257},
            },
        ],
        "requestBody": {"required": False, "content": {"application/json": {"schema": {}}}},
        "responses": _responses(),
    }


def _responses() -> dict[str, Any]:
    errors = {
        "400": "The body is not JSON, the topic is not a topic, the priority is out of range, "
        "or the Idempotency-Key is malformed",
        "401": "Credentials are missing or invalid",
        "403": "The caller lacks the role or organisation class",
        "409": "The Idempotency-Key was used for another topic or body; nothing was recorded",
        "413": "The body is larger than the limit",
        "500": "The message could not be queued; nothing was recorded",
        "503": "The backend is unreachable (no connection within its publish_timeout: nothing "
        "was recorded; or no answer within it: the message may or may not have been recorded, "
        "an Idempotency-Key makes the retry safe): retry after the Retry-After header's seconds",
    }
    publication = {"application/json": {"schema": {"$ref": "#/components/schemas/Publication"}}}
    responses: dict[str, Any] = {
        "200": {
            "description": "The Idempotency-Key was used before: nothing was recorded, this is "
            "the first publication",
            "content": publication,
        },
        "202": {"description": "Recorded once per subscriber", "content": publication},
    }
    for status, description in errors.items():
        content = {"application/json": {"schema": _ERROR}}
        responses[status] = {"description": description, "content": content}
    return responses


def _schemas() -> dict[str, Any]:
    return {
        "Publication": {
            "type": "object",
            "required": ["id", "topic", "delivered"],
            "properties": {
                "id": {"type": "string", "description": "the id of the first row written"},
                "topic": {"type": "string", "description": "the trimmed topic"},
                "delivered": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "the number of subscribers",
                },
            },
        },
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"type": "string"}},
        },
    }


def _security_schemes(config: HttpConfig) -> dict[str, Any]:
    schemes: dict[str, Any] = {}
    if config.jwt is not None:
        schemes["bearer"] = {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    if config.api_keys:
        schemes["apiKey"] = {"type": "apiKey", "in": "header", "name": "X-Api-Key"}
    return schemes
