"""Bearer JWTs, verified with PyJWT: HS256 with a shared secret or RS256 with a public key.

A token must carry ``exp``, ``sub`` and the configured ``aud``; ``exp``, ``nbf`` and ``aud`` are
checked. Claims map to the principal: ``sub`` → id, ``roles`` (a list of strings), ``org`` and
``org_class`` (strings); its grant is a fingerprint of the audience and key. Failures raise
``InvalidCredentialsError`` with a fixed message that never contains the token.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import jwt
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from queuey.http.auth import InvalidCredentialsError, Principal

__all__ = ["MIN_SECRET_BYTES", "BearerVerifier", "load_public_key"]

MIN_SECRET_BYTES = 32
"""The shortest HS256 secret accepted, in bytes (RFC 7518 §3.2)."""

_REQUIRED_CLAIMS = ["exp", "sub", "aud"]


def load_public_key(pem: str) -> RSAPublicKey:
    """Load an RS256 verification key.

    Args:
        pem: an RSA public key in PEM (``-----BEGIN PUBLIC KEY-----``).

    Raises:
        ValueError: the text is not a PEM RSA public key.
    """
    try:
        key = load_pem_public_key(pem.encode())
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ValueError("is not a PEM public key") from None
    if not isinstance(key, RSAPublicKey):
        raise ValueError("is not an RSA public key (RS256)")
    return key


class BearerVerifier:
    """Verifies bearer tokens for one audience.

    Args:
        audience: the ``aud`` every token must carry.
        secret: the HS256 secret (at least ``MIN_SECRET_BYTES`` bytes); or
        public_key: the RS256 public key in PEM. Give exactly one.

    Raises:
        ValueError: neither or both keys given, a short secret, or a bad public key.
    """

    def __init__(
        self, audience: str, *, secret: str | None = None, public_key: str | None = None
    ) -> None:
        if (secret is None) == (public_key is None):
            raise ValueError("give exactly one of secret and public_key")
        self._audience = audience
        self._key: str | RSAPublicKey
        if public_key is not None:
            self._key, self._algorithm = load_public_key(public_key), "RS256"
        elif secret is not None and len(secret.encode()) >= MIN_SECRET_BYTES:
            self._key, self._algorithm = secret, "HS256"
        else:
            raise ValueError(f"an HS256 secret needs at least {MIN_SECRET_BYTES} bytes")
        parts = ("bearer", self._algorithm, audience, public_key or secret or "")
        self._grant = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]

    @property
    def grant(self) -> str:
        """The fingerprint (hex) of this verifier's audience and key: the grant of every
        principal it admits (a new key or audience gives a new one)."""
        return self._grant

    def __repr__(self) -> str:
        return f"BearerVerifier(audience={self._audience!r}, algorithm={self._algorithm!r})"

    def verify(self, token: str) -> Principal:
        """Verify ``token`` and return the principal its claims describe.

        Raises:
            InvalidCredentialsError: the token is malformed, forged, expired, for another
                audience, lacks a required claim, or has a claim of the wrong type.
        """
        try:
            claims = jwt.decode(
                token,
                self._key,
                algorithms=[self._algorithm],
                audience=self._audience,
                options={"require": _REQUIRED_CLAIMS},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidCredentialsError("the bearer token has expired") from None
        except jwt.InvalidAudienceError:
            raise InvalidCredentialsError("the bearer token is for another audience") from None
        except jwt.MissingRequiredClaimError as exc:
            message = f"the bearer token has no `{exc.claim}` claim"
            raise InvalidCredentialsError(message) from None
        except jwt.InvalidTokenError:
            raise InvalidCredentialsError("the bearer token is not valid") from None
        return replace(_principal(claims), grant=self.grant)


def _principal(claims: Mapping[str, Any]) -> Principal:
    subject, roles = claims["sub"], claims.get("roles", [])
    if not isinstance(subject, str) or not subject:
        raise InvalidCredentialsError("the bearer token's `sub` claim is not a non-empty string")
    if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
        raise InvalidCredentialsError("the bearer token's `roles` claim is not a list of strings")
    return Principal(
        id=subject,
        roles=frozenset(roles),
        org=_optional_string(claims, "org"),
        org_class=_optional_string(claims, "org_class"),
    )


def _optional_string(claims: Mapping[str, Any], name: str) -> str | None:
    value = claims.get(name)
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidCredentialsError(f"the bearer token's `{name}` claim is not a string")
    return value
