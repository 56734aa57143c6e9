"""The built-in authenticator: bearer JWTs and API keys from the ``[http]`` configuration.

A request carries at most one credential: ``Authorization: Bearer <jwt>``,
``Authorization: ApiKey <key>`` or ``X-Api-Key: <key>`` (schemes are case-insensitive). No
credential is an anonymous caller; several, an unknown scheme, an empty value, or a kind of
credential the configuration does not accept is ``InvalidCredentialsError`` (401). It is a
``GrantChecker``: a grant stands while the key entry or the bearer key that gave it is still
configured, unchanged.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.requests import HTTPConnection

from queuey.http.api_keys import ApiKeyTable
from queuey.http.auth import InvalidCredentialsError, Principal
from queuey.http.bearer import BearerVerifier
from queuey.http.config import HttpConfig

__all__ = ["CredentialAuthenticator"]

_BEARER = "bearer"
_API_KEY = "apikey"


class CredentialAuthenticator:
    """Resolves callers from a bearer JWT or an API key.

    Args:
        bearer: verifies bearer tokens, or ``None`` to refuse them.
        api_keys: the accepted API keys (empty to refuse them).
    """

    def __init__(self, bearer: BearerVerifier | None, api_keys: ApiKeyTable) -> None:
        self._bearer = bearer
        self._api_keys = api_keys
        self._grants = api_keys.grants | ({bearer.grant} if bearer is not None else set())

    @classmethod
    def from_config(cls, config: HttpConfig) -> CredentialAuthenticator:
        """The authenticator ``config``'s ``[http.jwt]`` and ``[[http.api_keys]]`` describe."""
        jwt = config.jwt
        bearer = (
            None
            if jwt is None
            else BearerVerifier(jwt.audience, secret=jwt.secret, public_key=jwt.public_key)
        )
        return cls(bearer, ApiKeyTable(config.api_keys))

    def __repr__(self) -> str:
        return f"CredentialAuthenticator({self._bearer!r}, {self._api_keys!r})"

    def honours(self, grant: str | None) -> bool:
        """Whether the API key entry or bearer verifier that gave ``grant`` is configured."""
        return grant in self._grants

    async def authenticate(self, request: HTTPConnection) -> Principal | None:
        """Return the caller, or ``None`` when the request carries no credential.

        Raises:
            InvalidCredentialsError: the credential is malformed, of a refused kind, or does
                not verify.
        """
        credential = _credential(request.headers)
        if credential is None:
            return None
        scheme, secret = credential
        if scheme == _BEARER:
            if self._bearer is None:
                raise InvalidCredentialsError("bearer tokens are not accepted here")
            return self._bearer.verify(secret)
        if not self._api_keys:
            raise InvalidCredentialsError("API keys are not accepted here")
        return self._api_keys.verify(secret)


def _credential(headers: Headers) -> tuple[str, str] | None:
    authorizations, api_keys = headers.getlist("authorization"), headers.getlist("x-api-key")
    if len(authorizations) + len(api_keys) > 1:
        raise InvalidCredentialsError("send one credential, not several")
    if api_keys:
        return _API_KEY, _non_empty(api_keys[0])
    if not authorizations:
        return None
    scheme, _, secret = authorizations[0].strip().partition(" ")
    if scheme.lower() not in (_BEARER, _API_KEY):
        raise InvalidCredentialsError("unsupported Authorization scheme (use Bearer or ApiKey)")
    return scheme.lower(), _non_empty(secret)


def _non_empty(secret: str) -> str:
    secret = secret.strip()
    if not secret:
        raise InvalidCredentialsError("the credential is empty")
    return secret
