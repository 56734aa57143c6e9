"""The publish endpoint as a Starlette app: ``POST {base}/queues/{topic}``.

Mount it in a Starlette or FastAPI app (``Mount("/hooks", app=publish_app(...))``) or serve it
with ``queuey serve``. A request is checked in this order, and the first failing check answers:
405 not POST; 404 the policy is private; 401 credentials missing, or present and
invalid (even on a public route); 403 wrong role or organisation class; 413 body over the limit;
400 body not JSON; 400 not a topic (or a priority, from the ``priority`` query parameter or
the ``X-Queuey-Priority`` header, that is not a whole number in range, or a malformed
``Idempotency-Key``); then 202 with the publication, or 503 with ``Retry-After`` when the
backend is unreachable (no connection within its ``publish_timeout``: nothing was written, the
same request may succeed later; or no answer within it: the message may or may not have been
written, and a retry with the same ``Idempotency-Key`` is safe), or 500 when it fails
otherwise. With an ``Idempotency-Key`` header, a key already used within
``[queues] idempotency_hours`` writes nothing and answers 200 with the first publication; the
same key with another topic or body is 409. Every error body is ``{"error": "..."}`` and never
quotes a credential.

Whatever follows ``{base}/queues/`` is the topic, so a malformed one (empty, with a slash,
encoded or not, a newline or another character a topic cannot have) reaches the topic check
and is a 400 like any other bad topic, never the router's 404.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

import queuey
from queuey.backends.base import JobLookup
from queuey.errors import BackendError, BackendUnavailableError
from queuey.http.access import AccessPolicy, Level
from queuey.http.auth import Authenticator, InvalidCredentialsError, Principal
from queuey.http.authorization import authorize
from queuey.http.body import (
    BodyTooLargeError,
    JsonValue,
    MalformedBodyError,
    parse_message,
    read_body,
)
from queuey.http.config import HttpConfig
from queuey.http.credentials import CredentialAuthenticator
from queuey.http.jobs import JobsEndpoint
from queuey.http.openapi import openapi_document
from queuey.topics.publication import (
    IdempotencyConflictError,
    InvalidTopicError,
    KeyedPublisher,
    Publication,
    Publisher,
)

__all__ = ["PRIORITY_HEADER", "QUEUE_FAILED", "RETRY_AFTER_SECS", "publish_app"]

PRIORITY_HEADER = "X-Queuey-Priority"
"""The request header that may carry a message's priority (the ``priority`` query parameter
wins when both are given)."""

_WHOLE = re.compile(r"-?[0-9]{1,6}")

logger = logging.getLogger(__name__)

QUEUE_FAILED = "the message could not be queued"

RETRY_AFTER_SECS = 5
"""The ``Retry-After`` (seconds) of a 503 answered while the backend is unreachable."""


class _RestOfPath(Convertor[str]):
    """The rest of the path, slashes and newlines included (``path`` stops at a newline)."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


_TOPIC_CONVERTOR = "queuey_rest_of_path"
register_url_convertor(_TOPIC_CONVERTOR, _RestOfPath())


def publish_app(
    config: HttpConfig,
    publisher: Publisher,
    access: AccessPolicy,
    *,
    authenticator: Authenticator | None = None,
    mounts: Sequence[BaseRoute] = (),
    jobs: JobLookup | None = None,
    jobs_access: AccessPolicy | None = None,
) -> Starlette:
    """Build the ASGI app serving the publish endpoint (and its OpenAPI description).

    Logs a warning when ``access`` closed the door unasked (``access.problem``) or when it
    needs credentials that nothing can verify.

    Args:
        config: the ``[http]`` settings: base path, body limit, accepted credentials.
        publisher: records each accepted message.
        access: who may publish (the parsed ``[queues] publish`` string).
        authenticator: resolves callers; by default bearer JWTs and API keys from ``config``.
        mounts: more routes served by the same app, e.g. the dashboard
            (``queuey.dashboard.dashboard_mount``), which answer for themselves.
        jobs: where ``GET {base}/jobs/{id}`` reads a job (``queuey.http.jobs``), served only
            with ``jobs_access`` (the parsed ``[queues] jobs`` string) not private.
        jobs_access: who may read jobs; ``None`` or private: the route does not exist.

    Returns:
        The app. ``GET {base}/openapi.json`` (describing the routes that exist) exists only
        when ``access`` or ``jobs_access`` is not private.
    """
    _warn_at_start(config, access, custom=authenticator is not None)
    endpoint = _PublishEndpoint(
        config, publisher, access, authenticator or CredentialAuthenticator.from_config(config)
    )
    topic_path = f"{config.base}/queues/{{topic:{_TOPIC_CONVERTOR}}}"
    routes: list[BaseRoute] = [Route(topic_path, endpoint.publish, methods=["POST"])]
    if jobs is not None and jobs_access is not None and not jobs_access.is_private:
        admit = _Admission(jobs_access, endpoint.authenticator, endpoint.challenge)
        reader = JobsEndpoint(jobs, admit, RETRY_AFTER_SECS)
        routes.append(Route(f"{config.base}/jobs/{{job_id}}", reader.show, methods=["GET"]))
        endpoint.jobs_access = jobs_access
    if not access.is_private or endpoint.jobs_access is not None:
        routes.append(Route(f"{config.base}/openapi.json", endpoint.openapi, methods=["GET"]))
    routes.extend(mounts)  # the dashboard, mounted beside the endpoint
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
    )
    app.router.redirect_slashes = False
    return app


class _PublishEndpoint:
    """The request handlers, bound to one configuration."""

    def __init__(
        self,
        config: HttpConfig,
        publisher: Publisher,
        access: AccessPolicy,
        authenticator: Authenticator,
    ) -> None:
        self._config, self._publisher = config, publisher
        self._access, self._authenticator = access, authenticator
        self._challenge = {"WWW-Authenticate": _challenge(config)}
        self.jobs_access: AccessPolicy | None = None
        """Who may read jobs, once ``GET {base}/jobs/{job_id}`` is served (described then)."""

    async def publish(self, request: Request) -> Response:
        principal = await self._admit(request)
        message = await self._message(request)
        published_by = "" if principal is None else principal.id
        topic, priority = request.path_params["topic"], _priority(request)
        key = _idempotency_key(request)
        return await self._record(topic, message, published_by, priority, key)

    async def openapi(self, request: Request) -> Response:
        document = openapi_document(
            self._config, self._access, version=queuey.__version__, jobs_access=self.jobs_access
        )
        if root_path := request.scope.get("root_path"):
            document["servers"] = [{"url": root_path}]
        return JSONResponse(document)

    @property
    def authenticator(self) -> Authenticator:
        """Resolves callers."""
        return self._authenticator

    @property
    def challenge(self) -> dict[str, str]:
        """The ``WWW-Authenticate`` header of a 401."""
        return self._challenge

    async def _admit(self, request: Request) -> Principal | None:
        return await _Admission(self._access, self._authenticator, self._challenge)(request)

    async def _message(self, request: Request) -> JsonValue:
        try:
            return parse_message(await read_body(request, self._config.max_body_bytes))
        except BodyTooLargeError as exc:
            raise HTTPException(413, str(exc), headers={"Connection": "close"}) from None
        except MalformedBodyError as exc:
            raise HTTPException(400, str(exc)) from None

    async def _record(
        self, topic: str, message: JsonValue, published_by: str, priority: int, key: str | None
    ) -> Response:
        try:
            publication = await self._publish(topic, message, published_by, priority, key)
        except BackendUnavailableError as exc:
            logger.warning("publishing to topic %r failed: %s", topic, exc)
            detail = f"{QUEUE_FAILED}: the backend is unreachable, try again later"
            headers = {"Retry-After": str(RETRY_AFTER_SECS)}
            raise HTTPException(503, detail, headers=headers) from None
        except BackendError as exc:  # first: a refused statement is a ValueError too
            logger.error("publishing to topic %r failed: %s", topic, exc)
            raise HTTPException(500, QUEUE_FAILED) from None
        except (InvalidTopicError, ValueError) as exc:  # a bad topic, priority or payload
            raise HTTPException(400, str(exc)) from None
        status = 200 if publication.replayed else 202
        return JSONResponse(publication.as_json(), status_code=status)

    async def _publish(
        self, topic: str, message: JsonValue, published_by: str, priority: int, key: str | None
    ) -> Publication:
        """Publish, with ``key`` when there is one.

        Raises:
            HTTPException: 409 for a key used with another topic or body; 400 for a key given
                to a publisher that takes none.
        """
        if key is None:
            return await self._publisher.publish(topic, message, published_by, priority=priority)
        if not isinstance(self._publisher, KeyedPublisher):
            raise HTTPException(400, "this endpoint does not take an Idempotency-Key")
        try:
            return await self._publisher.publish(
                topic, message, published_by, priority=priority, key=key
            )
        except IdempotencyConflictError as exc:
            raise HTTPException(409, str(exc)) from None


def _priority(request: Request) -> int:
    """The message's priority: the ``priority`` query parameter, else the ``X-Queuey-Priority``
    header, else 0 (its range is checked when it is published).

    Raises:
        HTTPException: 400 when it is not a whole number.
    """
    raw = request.query_params.get("priority") or request.headers.get(PRIORITY_HEADER) or "0"
    if not _WHOLE.fullmatch(raw.strip()):
        raise HTTPException(400, f"priority must be a whole number, got {raw[:20]!r}")
    return int(raw)


IDEMPOTENCY_KEY = "Idempotency-Key"
MAX_KEY_CHARS = 255


def _idempotency_key(request: Request) -> str | None:
    """The ``Idempotency-Key`` header: a token or a quoted string (the IETF draft's form) of 1
    to 255 visible ASCII characters; ``None`` when absent.

    Raises:
        HTTPException: 400 when it is present but malformed.
    """
    raw = request.headers.get(IDEMPOTENCY_KEY)
    if raw is None:
        return None
    key = raw.strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not 0 < len(key) <= MAX_KEY_CHARS or not all(" " < c <= "~" for c in key):
        message = f"{IDEMPOTENCY_KEY}: expected 1 to {MAX_KEY_CHARS} visible ASCII characters"
        raise HTTPException(400, message)
    return key


def _challenge(config: HttpConfig) -> str:
    schemes = ["Bearer"] if config.jwt is not None or not config.api_keys else []
    return ", ".join([*schemes, *(["ApiKey"] if config.api_keys else [])])


async def _http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):
        raise exc
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": "internal error"}, status_code=500)


def _warn_at_start(config: HttpConfig, access: AccessPolicy, *, custom: bool) -> None:
    if access.problem is not None:
        logger.warning("[queues] publish = %s; the HTTP endpoint stays closed", access.problem)
    needs_credentials = not access.is_private and (
        access.level is not Level.PUBLIC or access.org_class is not None
    )
    if needs_credentials and not custom and config.jwt is None and not config.api_keys:
        logger.warning(
            "[queues] publish = %r needs credentials, but [http] configures neither jwt nor "
            "api_keys: every publish will be refused",
            str(access),
        )


class _Admission:
    """Lets a request in under ``access`` (its principal), or raises the refusal."""

    def __init__(
        self, access: AccessPolicy, authenticator: Authenticator, challenge: dict[str, str]
    ) -> None:
        self._access, self._authenticator, self._challenge = access, authenticator, challenge

    async def __call__(self, request: Request) -> Principal | None:
        """The caller, when ``access`` admits it.

        Raises:
            HTTPException: 404 private, 401 credentials missing or invalid, 403 refused.
        """
        if self._access.is_private:
            principal = None
        else:
            try:
                principal = await self._authenticator.authenticate(request)
            except InvalidCredentialsError as exc:
                raise HTTPException(401, str(exc), headers=self._challenge) from None
        refusal = authorize(self._access, principal)
        if refusal is not None:
            headers = self._challenge if refusal.status == 401 else None
            raise HTTPException(refusal.status, refusal.message, headers=headers)
        return principal
