"""The HTTP publish endpoint: ``POST {base}/queues/{topic}`` as a Starlette app.

Needs the ``http`` extra (``pip install 'queuey-jobs[http]'``). Build the app with
:func:`publish_app` from an :class:`HttpConfig` (the ``[http]`` table), a publisher and the
parsed ``[queues] publish`` access string (:meth:`AccessPolicy.parse`); mount it in your own
Starlette or FastAPI app, or run it with ``queuey serve``. See ``docs/http.md``.
"""

from queuey._extras import missing_extra

try:
    import jwt  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:
    raise missing_extra("the HTTP endpoint", "http", exc) from exc

from queuey.http.access import AccessPolicy, Level
from queuey.http.api_keys import ApiKeyTable, api_key_digest
from queuey.http.app import publish_app
from queuey.http.auth import Authenticator, InvalidCredentialsError, Principal
from queuey.http.bearer import BearerVerifier
from queuey.http.config import ApiKeyConfig, HttpConfig, JwtConfig
from queuey.http.credentials import CredentialAuthenticator

__all__ = [
    "AccessPolicy",
    "ApiKeyConfig",
    "ApiKeyTable",
    "Authenticator",
    "BearerVerifier",
    "CredentialAuthenticator",
    "HttpConfig",
    "InvalidCredentialsError",
    "JwtConfig",
    "Level",
    "Principal",
    "api_key_digest",
    "publish_app",
]
