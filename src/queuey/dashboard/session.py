"""Browser sessions: a signed cookie naming the principal, and the CSRF token it carries.

The cookie holds the principal (id, roles, organisation and its class, and the grant: a
fingerprint of the key entry or token verifier that signed in), when the session ends, a
random session id and a random CSRF token, as base64url JSON followed by an HMAC-SHA256
signature over it. It is ``HttpOnly``, ``SameSite=Strict``, scoped to the dashboard's path and
``Secure`` on HTTPS. It never holds the API key or token that signed in. A form that acts
sends the CSRF token back; :meth:`Session.csrf_matches` compares it in constant time. The
guard refuses a session whose id was signed out or whose grant no longer stands.

The same key signs short-lived values of other purposes (:meth:`SessionSigner.seal`), such
as the status message a page shows after an action, so a link cannot forge one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from queuey.http.auth import Principal

__all__ = ["COOKIE", "Session", "SessionSigner", "SignOutRecord"]

COOKIE = "queuey_dashboard"
"""The session cookie's name."""


@dataclass(frozen=True)
class Session:
    """A signed-in browser.

    Attributes:
        principal: who signed in.
        expires: when the session ends (seconds since the epoch).
        csrf: the token every acting form must send back.
        sid: the session's id, recorded when it signs out.
    """

    principal: Principal
    expires: float
    csrf: str
    sid: str

    def csrf_matches(self, token: str | None) -> bool:
        """Whether ``token`` is this session's CSRF token (constant-time comparison)."""
        return token is not None and hmac.compare_digest(token.encode(), self.csrf.encode())


class SignOutRecord(Protocol):
    """Where signed-out sessions are recorded, shared by every process serving the dashboard
    (``PgDashboardStore`` keeps them in the database)."""

    async def sign_out(self, session: str, until: float) -> None:
        """Record the session id ``session`` as signed out until ``until`` (epoch seconds)."""
        ...

    async def signed_out(self, session: str) -> bool:
        """Whether the session id ``session`` was signed out."""
        ...


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
        return Session(principal, expires, secrets.token_urlsafe(24), secrets.token_urlsafe(18))

    def encode(self, session: Session) -> str:
        """The cookie value for ``session``."""
        principal = session.principal
        document = {
            "sub": principal.id,
            "roles": sorted(principal.roles),
            "org": principal.org,
            "org_class": principal.org_class,
            "grant": principal.grant,
            "exp": session.expires,
            "csrf": session.csrf,
            "sid": session.sid,
        }
        return self._signed(document)

    def decode(self, value: str | None) -> Session | None:
        """The session a cookie value holds; ``None`` when absent, forged, malformed or over."""
        document = self._opened(value)
        if document is None or not _well_formed(document) or document["exp"] <= time.time():
            return None
        roles, org, org_class = frozenset(document["roles"]), document["org"], document["org_class"]
        principal = Principal(document["sub"], roles, org, org_class, document.get("grant"))
        return Session(principal, float(document["exp"]), document["csrf"], document["sid"])

    def seal(self, purpose: str, value: dict[str, object], lifetime_secs: float) -> str:
        """``value`` (JSON-able) signed for ``purpose``, readable by :meth:`unseal` for
        ``lifetime_secs`` seconds; URL-safe."""
        return self._signed({"for": purpose, "exp": time.time() + lifetime_secs, "v": value})

    def unseal(self, purpose: str, token: str | None) -> dict[str, object] | None:
        """The value :meth:`seal` signed for ``purpose``; ``None`` when absent, forged, for
        another purpose or over."""
        document = self._opened(token)
        if document is None or document.get("for") != purpose:
            return None
        expires, value = document.get("exp"), document.get("v")
        if not isinstance(expires, int | float) or expires <= time.time():
            return None
        return value if isinstance(value, dict) else None

    def _signed(self, document: Mapping[str, object]) -> str:
        body = _b64(json.dumps(document, separators=(",", ":")).encode())
        return f"{body}.{_b64(self._sign(body))}"

    def _opened(self, value: str | None) -> dict[str, Any] | None:
        if not value or value.count(".") != 1:
            return None
        body, signature = value.split(".")
        try:
            valid = hmac.compare_digest(_unb64(signature), self._sign(body))
            document = json.loads(_unb64(body)) if valid else None
        except (ValueError, binascii.Error):
            return None
        return document if isinstance(document, dict) else None

    def _sign(self, body: str) -> bytes:
        return hmac.new(self._key, body.encode(), hashlib.sha256).digest()


def _well_formed(document: dict[str, object]) -> bool:
    roles = document.get("roles")
    return (
        isinstance(document.get("sub"), str)
        and isinstance(roles, list)
        and all(isinstance(role, str) for role in roles)
        and all(isinstance(document.get(k), str | None) for k in ("org", "org_class", "grant"))
        and isinstance(document.get("exp"), int | float)
        and isinstance(document.get("csrf"), str)
        and isinstance(document.get("sid"), str)
        and "for" not in document
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
