"""Environment references in an app file's string values, so secrets and URLs stay out of it.

| written            | means                                                           |
|--------------------|-----------------------------------------------------------------|
| ``$VAR``, ``${VAR}`` | the variable's value; ``""`` with a warning when unset        |
| ``${VAR:-default}``  | the value, or ``default`` when the variable is unset or empty |
| ``$$``               | a literal ``$``                                               |
| any other ``$``      | itself (``$19.99``, ``US$``, an unterminated ``${``)           |

A name is a letter or ``_`` followed by letters, digits or ``_``. Expansion runs on the parsed
document, so a value containing ``"`` cannot change the file's shape; keys are never expanded.
The warning for an unset variable names the variable and the file, never a value.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["expand_document", "expand_string"]

log = logging.getLogger("queuey.config")

_REFERENCE = re.compile(
    r"\$(?:(?P<dollar>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


def expand_string(text: str, source: str, environ: Mapping[str, str] | None = None) -> str:
    """Expand the references in ``text``.

    Args:
        text: a string value from the file.
        source: the file, named in the warning for an unset variable.
        environ: the variables (default ``os.environ``).

    Returns:
        The expanded text.
    """
    if "$" not in text:
        return text
    env = os.environ if environ is None else environ

    def replace(match: re.Match[str]) -> str:
        if match.group("dollar"):
            return "$"
        name = match.group("braced") or match.group("bare")
        value = env.get(name, "")
        if value:
            return value
        default = match.group("default")
        if default is not None:
            return default
        log.warning(
            "environment variable %s is not set (used in %s); using an empty string "
            "(write ${%s:-...} to give a default)",
            name,
            source,
            name,
        )
        return ""

    return _REFERENCE.sub(replace, text)


def expand_document(value: Any, source: str, environ: Mapping[str, str] | None = None) -> Any:
    """A copy of a parsed TOML value with every string (in tables and arrays) expanded."""
    if isinstance(value, str):
        return expand_string(value, source, environ)
    if isinstance(value, list):
        return [expand_document(item, source, environ) for item in value]
    if isinstance(value, dict):
        return {key: expand_document(item, source, environ) for key, item in value.items()}
    return value
