"""Who is calling: the principal, the authenticator protocol, and the 401 error.

An authenticator turns a request into a :class:`Principal`, or ``None`` for an anonymous
caller. Credentials that are present but do not verify raise :class:`InvalidCredentialsError`,
which the endpoint answers with 401 whatever the access policy (even ``public``). The built-in
authenticator (bearer JWT and API keys) lives in :mod:`queuey.http.credentials`.

A principal may carry a ``grant``: a fingerprint of the configuration that let it in (an API
key's entry with its roles, or the bearer verifier's key and audience). A browser session
keeps it, and an authenticator that is a :class:`GrantChecker` says on every request whether
that configuration still stands, so removing a key, or changing its roles, ends its sessions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from starlette.requests import HTTPConnection

from queuey.errors import QueueyError

__all__ = ["ADMIN_ROLE", "Authenticator", "GrantChecker", "InvalidCredentialsError", "Principal"]

ADMIN_ROLE = "admin"
"""The role that satisfies every role check."""


class InvalidCredentialsError(QueueyError):
    """The request carries credentials that do not verify.

    The message is sent to the caller as the 401 body, so it must never contain the credential.
    """


@dataclass(frozen=True)
class Principal:
    """An authenticated caller.

    Attributes:
        id: who the caller is; recorded as ``published_by`` on every row it publishes.
        roles: the roles the caller holds (in its organisation, when it acts in one).
        org: the organisation the caller acts in, or ``None``.
        org_class: the class of that organisation, or ``None``.
        grant: a fingerprint (hex) of the configuration that admitted it, or ``None`` when
            the authenticator gives none; not part of equality.
    """

    id: str
    roles: frozenset[str] = field(default_factory=frozenset)
    org: str | None = None
    org_class: str | None = None
    grant: str | None = field(default=None, compare=False, repr=False)

    def has_role(self, role: str) -> bool:
        """Whether the caller holds ``role``; ``admin`` holds every role."""
        return role in self.roles or ADMIN_ROLE in self.roles


class Authenticator(Protocol):
    """Resolves the caller of a request."""

    async def authenticate(self, request: HTTPConnection) -> Principal | None:
        """Return the caller, or ``None`` when the request carries no credentials.

        Args:
            request: the incoming request; only its headers should be needed.

        Raises:
            InvalidCredentialsError: credentials are present but do not verify (answered 401).
        """
        ...


@runtime_checkable
class GrantChecker(Protocol):
    """An authenticator that can tell whether a grant it gave earlier still stands."""

    def honours(self, grant: str | None) -> bool:
        """Whether a principal admitted under ``grant`` keeps its rights now (``False`` once
        the key, its roles or the token verifier it came from changed or went away)."""
        ...
