"""The access grammar of the ``[queues] publish`` setting, parsed once.

``public | authenticated | member | role:<name> | private | owner``, each optionally followed by
``@org_class=<name>``. Levels are exact and case-sensitive. Whatever does not describe a door
someone could open closes it: ``owner`` (a topic has no owner), an empty or malformed role or
class name, and any text that does not parse all become ``private``, and the parsed value keeps
a ``problem`` naming the value and saying why, for the warning start-up logs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["AccessPolicy", "Level"]

_QUALIFIER = "@org_class="
_ROLE_PREFIX = "role:"


class Level(enum.Enum):
    """Who may pass, before any organisation-class qualifier narrows it."""

    PUBLIC = "public"
    """Anyone, with no credentials."""
    AUTHENTICATED = "authenticated"
    """Any caller with valid credentials."""
    MEMBER = "member"
    """A caller acting in an organisation (the credential names one)."""
    ROLE = "role"
    """A caller holding the policy's role, or ``admin``."""
    PRIVATE = "private"
    """Nobody: the endpoint does not exist (404)."""


@dataclass(frozen=True)
class AccessPolicy:
    """A parsed access string: a level, its role, and an optional organisation class.

    Build one with :meth:`parse`; ``str(policy)`` gives the canonical text back.

    Attributes:
        level: who may pass.
        role: the role ``Level.ROLE`` asks for; ``None`` for every other level.
        org_class: the class the caller's organisation must have, or ``None`` for no
            qualifier. A qualifier only narrows: ``public@org_class=staff`` is not public.
        problem: why the parsed text closed the door although it did not say ``private``,
            naming the text (``None`` when it parsed as written). Not part of equality.
    """

    level: Level
    role: str | None = None
    org_class: str | None = None
    problem: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if (self.level is Level.ROLE) != (self.role is not None):
            raise ValueError("a role is given exactly when the level is Level.ROLE")
        if self.level is Level.PRIVATE and self.org_class is not None:
            raise ValueError("a private policy takes no organisation class")

    @classmethod
    def parse(cls, text: str) -> AccessPolicy:
        """Parse an access string; never raises: what does not parse is ``private``.

        The whole text is trimmed and split at the first ``@org_class=``; both halves are
        trimmed. A role or class name must be non-empty and hold no whitespace and no ``@``.

        Args:
            text: the access string, e.g. ``"role:ops@org_class=staff"``.

        Returns:
            The policy; when it is private without saying so, ``problem`` names ``text`` and
            says why (e.g. ``"'role:' has an empty role"``).
        """
        level_text, qualified, class_text = text.strip().partition(_QUALIFIER)
        org_class = class_text.strip() if qualified else None
        problem = _name_problem(org_class, "organisation class") if org_class is not None else None
        parsed = problem or _parse_level(level_text.strip(), org_class)
        if isinstance(parsed, str):
            return cls(Level.PRIVATE, problem=f"{text!r} {parsed}")
        return parsed

    @property
    def is_private(self) -> bool:
        """Whether nobody may publish (the endpoint answers 404)."""
        return self.level is Level.PRIVATE

    def __str__(self) -> str:
        level = f"{_ROLE_PREFIX}{self.role}" if self.role is not None else self.level.value
        return level if self.org_class is None else f"{level}{_QUALIFIER}{self.org_class}"


def _parse_level(text: str, org_class: str | None) -> AccessPolicy | str:
    """The policy ``text`` names, or why it names none."""
    if text.startswith(_ROLE_PREFIX):
        role = text.removeprefix(_ROLE_PREFIX)
        problem = _name_problem(role, "role")
        return problem or AccessPolicy(Level.ROLE, role=role, org_class=org_class)
    if text == "owner":
        return "says `owner`, which a topic cannot have"
    try:
        level = Level(text)
    except ValueError:
        return "is not an access string"
    if level is Level.ROLE:
        return "is not an access string"
    if level is Level.PRIVATE:
        return AccessPolicy(Level.PRIVATE)
    return AccessPolicy(level, org_class=org_class)


def _name_problem(name: str, what: str) -> str | None:
    if not name:
        return f"has an empty {what}"
    if "@" in name or any(char.isspace() for char in name):
        return f"has an invalid {what} name (no spaces or `@` allowed)"
    return None
