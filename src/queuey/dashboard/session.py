"""Browser sessions: a signed cookie naming the principal, and the CSRF token it carries.

The cookie holds the principal (id, roles, organisation and its class), when the session ends
and a random CSRF token, as base64url JSON followed by an HMAC-SHA256 signature over it. It is
``HttpOnly``, ``SameSite=Strict``, scoped to the dashboard's path and ``Secure`` on HTTPS. It
never holds the API key or token that signed in. A form that acts sends the CSRF token back;
:meth:`Session.csrf_matches` compares it in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from queuey.http.auth import Principal

__all__ = ["COOKIE", "Session", "SessionSigner"]

COOKIE = "queuey_dashboard"
"""The session cookie's name."""


@dataclass(frozen=True)
class Session:
    """A signed-in browser.

    Attributes:
        principal: who signed in.
        expires: when the session ends (seconds since the epoch).
        csrf: the token every acting form must send back.
    """

    principal: Principal
    expires: float
    csrf: str

    def csrf_matches(self, token: str | None) -> bool:
        """Whether ``token`` is this session's CSRF token (constant-time comparison)."""
        return token is not None and hmac.compare_digest(token.encode(), self.csrf.encode())


class SessionSigner:
    """Signs and verifies session cookies with one key.

    Args:
        secret: the signing key (at least 32 bytes), or ``None`` for a random key that lives
            as long as this object.
        lifetime_secs: how long a new session lasts, in seconds.
    """

    def __init__(self, secret: str | None, lifetime_secs: float) -> None:
        self._key = secret.encode() if secret is not None else secrets.token_bytes(32)
        self.lifetime_secs = lifetime_secs

    def __repr__(self) -> str:
        return f"SessionSigner(lifetime_secs={self.lifetime_secs!r})"

    def new(self, principal: Principal, *, ends_by: float | None = None) -> Session:
        """A fresh session for ``principal``, ending after the lifetime or at ``ends_by``
        (seconds since the epoch, e.g. a bearer token's ``exp``), whichever comes first."""
        expires = time.time() + self.lifetime_secs
        if ends_by is not None:
            expires = min(expires, ends_by)
        return Session(principal, expires, secrets.token_urlsafe(24))

    def encode(self, session: Session) -> str:
        """The cookie value for ``session``."""
        principal = session.principal
        document = {
            "sub": principal.id,
            "roles": sorted(principal.roles),
            "org": principal.org,
            "org_class": principal.org_class,
            "exp": session.expires,
            "csrf": session.csrf,
        }
        body = _b64(json.dumps(document, separators=(",", ":")).encode())
        return f"{body}.{_b64(self._sign(body))}"

    def decode(self, value: str | None) -> Session | None:
        """The session a cookie value holds; ``None`` when absent, forged, malformed or over."""
        if not value or value.count(".") != 1:
            return None
        body, signature = value.split(".")
        try:
            valid = hmac.compare_digest(_unb64(signature), self._sign(body))
            document = json.loads(_unb64(body)) if valid else None
        except (ValueError, binascii.Error):
            return None
        if not isinstance(document, dict) or not _well_formed(document):
            return None
        if document["exp"] <= time.time():
            return None
        principal = Principal(
            document["sub"], frozenset(document["roles"]), document["org"], document["org_class"]
        )
        return Session(principal, float(document["exp"]), document["csrf"])

    def _sign(self, body: str) -> bytes:
        return hmac.new(self._key, body.encode(), hashlib.sha256).digest()


def _well_formed(document: dict[str, object]) -> bool:
    roles = document.get("roles")
    return (
        isinstance(document.get("sub"), str)
        and isinstance(roles, list)
        and all(isinstance(role, str) for role in roles)
        and all(isinstance(document.get(k), str | None) for k in ("org", "org_class"))
        and isinstance(document.get("exp"), int | float)
        and isinstance(document.get("csrf"), str)
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
