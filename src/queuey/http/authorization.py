"""The access decision: may this principal publish under this policy?

Checks run in this order: a private policy answers 404 before
anything else; then an organisation-class qualifier; then the level. Roles count wherever the
credential carries them; ``member`` and a class qualifier need an organisation.
"""

from __future__ import annotations

from dataclasses import dataclass

from queuey.http.access import AccessPolicy, Level
from queuey.http.auth import Principal

__all__ = [
    "AUTHENTICATION_REQUIRED",
    "FORBIDDEN",
    "NO_ORGANISATION",
    "NOT_ACCEPTED",
    "Refusal",
    "authorize",
]

NOT_ACCEPTED = "this app does not accept published messages"
AUTHENTICATION_REQUIRED = "authentication required"
FORBIDDEN = "forbidden"
NO_ORGANISATION = "select an organisation: the credential does not act in one"


@dataclass(frozen=True)
class Refusal:
    """Why a request may not publish.

    Attributes:
        status: the HTTP status to answer (401, 403 or 404).
        message: the ``error`` text of the response body.
    """

    status: int
    message: str


def authorize(policy: AccessPolicy, principal: Principal | None) -> Refusal | None:
    """Decide whether ``principal`` may publish under ``policy``.

    Args:
        policy: the parsed access policy.
        principal: the caller, ``None`` when anonymous.

    Returns:
        ``None`` when the caller may publish, else the refusal to answer with.
    """
    if policy.level is Level.PRIVATE:
        return Refusal(404, NOT_ACCEPTED)
    if policy.org_class is not None and (refusal := _check_class(policy.org_class, principal)):
        return refusal
    if policy.level is Level.PUBLIC:
        return None
    if principal is None:
        return Refusal(401, AUTHENTICATION_REQUIRED)
    return _check_level(policy, principal)


def _check_class(org_class: str, principal: Principal | None) -> Refusal | None:
    if principal is None:
        return Refusal(401, AUTHENTICATION_REQUIRED)
    if principal.org is None:
        return Refusal(403, NO_ORGANISATION)
    if principal.org_class != org_class:
        return Refusal(403, f"requires an organisation of class `{org_class}`")
    return None


def _check_level(policy: AccessPolicy, principal: Principal) -> Refusal | None:
    if policy.level is Level.MEMBER and principal.org is None:
        return Refusal(403, FORBIDDEN)
    if policy.role is not None and not principal.has_role(policy.role):
        return Refusal(403, FORBIDDEN)
    return None
