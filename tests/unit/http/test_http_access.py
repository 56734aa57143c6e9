"""The access grammar (SEEDS-DIGEST §1.12), with our closing of owner and empty names."""

from __future__ import annotations

import pytest

from queuey.http import AccessPolicy, Level


@pytest.mark.parametrize(
    ("text", "level", "role", "org_class"),
    [
        ("public", Level.PUBLIC, None, None),
        ("authenticated", Level.AUTHENTICATED, None, None),
        ("member", Level.MEMBER, None, None),
        ("private", Level.PRIVATE, None, None),
        ("role:ops", Level.ROLE, "ops", None),
        ("role:admin", Level.ROLE, "admin", None),
        ("role:a:b", Level.ROLE, "a:b", None),
        ("public@org_class=staff", Level.PUBLIC, None, "staff"),
        ("authenticated@org_class=staff", Level.AUTHENTICATED, None, "staff"),
        ("member@org_class=partner", Level.MEMBER, None, "partner"),
        ("role:ops@org_class=staff", Level.ROLE, "ops", "staff"),
        ("  role:ops @org_class= staff  ", Level.ROLE, "ops", "staff"),
    ],
)
def test_every_form_parses(
    text: str, level: Level, role: str | None, org_class: str | None
) -> None:
    policy = AccessPolicy.parse(text)
    assert (policy.level, policy.role, policy.org_class, policy.problem) == (
        level,
        role,
        org_class,
        None,
    )


@pytest.mark.parametrize(
    "text",
    [
        "public",
        "authenticated",
        "member",
        "private",
        "role:ops",
        "public@org_class=staff",
        "role:ops@org_class=staff",
    ],
)
def test_as_string_round_trips(text: str) -> None:
    assert str(AccessPolicy.parse(text)) == text
    assert AccessPolicy.parse(str(AccessPolicy.parse(text))) == AccessPolicy.parse(text)


def test_private_drops_its_qualifier_without_a_problem() -> None:
    policy = AccessPolicy.parse("private@org_class=staff")
    assert policy == AccessPolicy(Level.PRIVATE)
    assert policy.problem is None
    assert str(policy) == "private"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("wat", "is not an access string"),
        ("Public", "is not an access string"),
        ("PRIVATE", "is not an access string"),
        ("Role:ops", "is not an access string"),
        ("", "is not an access string"),
        ("role", "is not an access string"),
        ("publicc", "is not an access string"),
        ("pub lic", "is not an access string"),
        ("owner", "says `owner`, which a topic cannot have"),
        ("owner@org_class=staff", "says `owner`, which a topic cannot have"),
        ("role:", "has an empty role"),
        ("role:@org_class=staff", "has an empty role"),
        ("role: ops", "has an invalid role name (no spaces or `@` allowed)"),
        ("role:ops team", "has an invalid role name (no spaces or `@` allowed)"),
        ("role:ops@staff", "has an invalid role name (no spaces or `@` allowed)"),
        ("public@org_class=", "has an empty organisation class"),
        ("public@org_class=   ", "has an empty organisation class"),
        ("member@org_class=a b", "has an invalid organisation class name"),
        ("public@org_class=a@org_class=b", "has an invalid organisation class name"),
        ("public@org_class", "is not an access string"),
        ("public @ org_class=staff", "is not an access string"),
    ],
)
def test_what_does_not_parse_closes_the_door_and_says_why(text: str, reason: str) -> None:
    policy = AccessPolicy.parse(text)
    assert policy.level is Level.PRIVATE
    assert policy.is_private
    assert policy.role is None and policy.org_class is None
    assert policy.problem is not None
    assert policy.problem.startswith(f"{text!r} {reason}")


def test_a_qualifier_only_narrows() -> None:
    policy = AccessPolicy.parse("public@org_class=staff")
    assert policy != AccessPolicy.parse("public")
    assert not policy.is_private


def test_the_value_is_frozen_and_checked() -> None:
    policy = AccessPolicy.parse("role:ops")
    with pytest.raises(AttributeError):
        policy.role = "admin"  # type: ignore[misc]
    with pytest.raises(ValueError):
        AccessPolicy(Level.ROLE)
    with pytest.raises(ValueError):
        AccessPolicy(Level.PUBLIC, role="ops")
    with pytest.raises(ValueError):
        AccessPolicy(Level.PRIVATE, org_class="staff")
