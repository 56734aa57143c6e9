"""The access decision: seed order (private, class qualifier, level) and its messages."""

from __future__ import annotations

import pytest

from queuey.http import AccessPolicy, Principal
from queuey.http.authorization import (
    AUTHENTICATION_REQUIRED,
    FORBIDDEN,
    NO_ORGANISATION,
    NOT_ACCEPTED,
    Refusal,
    authorize,
)

ANONYMOUS = None
LONE = Principal("lone")
OPS = Principal("ops-user", frozenset({"ops"}))
ADMIN = Principal("root", frozenset({"admin"}))
MEMBER = Principal("m", frozenset({"member"}), org="acme", org_class="customer")
STAFF_OPS = Principal("s", frozenset({"ops"}), org="acme", org_class="staff")

OK = None
R401 = Refusal(401, AUTHENTICATION_REQUIRED)
R403 = Refusal(403, FORBIDDEN)
R404 = Refusal(404, NOT_ACCEPTED)
NO_ORG = Refusal(403, NO_ORGANISATION)
NOT_STAFF = Refusal(403, "requires an organisation of class `staff`")

CASES = [
    ("private", [R404, R404, R404, R404, R404, R404]),
    ("owner", [R404, R404, R404, R404, R404, R404]),
    ("wat", [R404, R404, R404, R404, R404, R404]),
    ("role:", [R404, R404, R404, R404, R404, R404]),
    ("public", [OK, OK, OK, OK, OK, OK]),
    ("authenticated", [R401, OK, OK, OK, OK, OK]),
    ("member", [R401, R403, R403, R403, OK, OK]),
    ("role:ops", [R401, R403, OK, OK, R403, OK]),
    ("role:admin", [R401, R403, R403, OK, R403, R403]),
    ("public@org_class=staff", [R401, NO_ORG, NO_ORG, NO_ORG, NOT_STAFF, OK]),
    ("member@org_class=staff", [R401, NO_ORG, NO_ORG, NO_ORG, NOT_STAFF, OK]),
    ("role:ops@org_class=staff", [R401, NO_ORG, NO_ORG, NO_ORG, NOT_STAFF, OK]),
    ("role:billing@org_class=staff", [R401, NO_ORG, NO_ORG, NO_ORG, NOT_STAFF, R403]),
]
CALLERS = [ANONYMOUS, LONE, OPS, ADMIN, MEMBER, STAFF_OPS]


@pytest.mark.parametrize(("policy", "expected"), CASES, ids=[case[0] for case in CASES])
def test_decision_table(policy: str, expected: list[Refusal | None]) -> None:
    parsed = AccessPolicy.parse(policy)
    assert [authorize(parsed, caller) for caller in CALLERS] == expected


def test_admin_satisfies_every_role() -> None:
    assert ADMIN.has_role("anything")
    assert not OPS.has_role("billing")
