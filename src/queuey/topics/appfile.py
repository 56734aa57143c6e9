"""Loading an app's TOML file: ``[queues]`` (with ``[queues.subscribe]``), ``[functions]`` and
``[database] url``.

```toml
[database]
url = "${DATABASE_URL:-postgresql://localhost/myapp}"

[functions]
send_welcome = "myapp.handlers:send_welcome"     # module:attribute

[queues.subscribe]
"user.signed_up" = "send_welcome"
```

String values may use ``$VAR``, ``${VAR}`` and ``${VAR:-default}`` (see ``_expansion``). The
other top-level tables (``[http]``, ``[dashboard]``) are kept, expanded, in ``AppConfig.tables``
for the modules that own them; a top-level table that is not in ``KNOWN_TABLES`` (a misspelt
``[dashbaord]``) is an error, as is an unknown key inside ``[queues]``. Every problem is a
``ConfigError`` naming the file and the key (a TOML syntax error names the line), never a
parser traceback.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from queuey._validation import Site, check_str, shown
from queuey.errors import ConfigError
from queuey.topics._expansion import expand_document
from queuey.topics.config import QueuesConfig

__all__ = ["AppConfig", "load_app_config"]

_QUEUES_KEYS = frozenset(f.name for f in fields(QueuesConfig))
_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_QUEUES = Site.table("queues")
_FUNCTIONS = Site.table("functions")
_DATABASE = Site.table("database")
KNOWN_TABLES = ("dashboard", "database", "functions", "http", "queues")
"""The top-level tables an app file may have; any other (a misspelling) is refused."""


@dataclass(frozen=True)
class AppConfig:
    """What an app file says.

    Attributes:
        path: the file, absolute.
        queues: the ``[queues]`` settings (defaults when the table is absent).
        functions: function name → ``"module:attribute"`` import path, from ``[functions]``.
        database_url: ``[database] url``, or ``None`` when absent or empty.
        tables: every top-level table of the file, with strings expanded (``tables["http"]``
            for the HTTP endpoint).
    """

    path: Path
    queues: QueuesConfig = field(default_factory=QueuesConfig)
    functions: Mapping[str, str] = field(default_factory=dict, hash=False)
    database_url: str | None = None
    tables: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def folder(self) -> Path:
        """The folder holding the file; ``[functions]`` modules are imported from it."""
        return self.path.parent


def load_app_config(path: str | os.PathLike[str]) -> AppConfig:
    """Read and check an app file.

    Args:
        path: the TOML file.

    Returns:
        The checked configuration.

    Raises:
        ConfigError: the file cannot be read, is not TOML (the message gives the line), or a
            value is wrong; the message names the file and the key.
    """
    file = Path(path).absolute()
    document = expand_document(_parse(file), str(file))
    with Site(file=str(file)).context():
        _check_tables(document)
        return AppConfig(
            path=file,
            queues=_queues(_table(document, "queues")),
            functions=MappingProxyType(_functions(_table(document, "functions"))),
            database_url=_database_url(_table(document, "database")),
            tables=MappingProxyType(document),
        )


def _parse(file: Path) -> dict[str, Any]:
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the app file: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None


def _check_tables(document: Mapping[str, Any]) -> None:
    """Refuse a top-level key that is not one of ``KNOWN_TABLES`` (``[dashbaord]``), naming
    the closest known one."""
    for key in sorted(set(document) - set(KNOWN_TABLES)):
        close = difflib.get_close_matches(key, KNOWN_TABLES, n=1)
        hint = f"did you mean [{close[0]}]? " if close else ""
        known = ", ".join(f"[{name}]" for name in KNOWN_TABLES)
        raise Site().error(f"[{key}]", f"not a table queuey reads ({hint}known: {known})")


def _table(document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = document.get(key, {})
    if not isinstance(value, Mapping):
        raise Site().error(key, f"expected a table ([{key}]), got {shown(value)}")
    return value


def _queues(table: Mapping[str, Any]) -> QueuesConfig:
    unknown = sorted(set(table) - _QUEUES_KEYS)
    if unknown:
        known = ", ".join(sorted(_QUEUES_KEYS))
        raise _QUEUES.error(unknown[0], f"not a [queues] setting (known: {known})")
    return QueuesConfig(**table)


def _functions(table: Mapping[str, Any]) -> dict[str, str]:
    functions: dict[str, str] = {}
    for name, target in table.items():
        key = name if name.isidentifier() else f'"{name}"'
        if not name.strip():
            raise _FUNCTIONS.error(key, "a function name cannot be empty")
        if not isinstance(target, str) or not _IMPORT_PATH.fullmatch(target.strip()):
            message = f'expected an import path "module:attribute", got {shown(target)}'
            raise _FUNCTIONS.error(key, message)
        functions[name.strip()] = target.strip()
    return functions


def _database_url(table: Mapping[str, Any]) -> str | None:
    url = table.get("url")
    if url is None:
        return None
    return check_str(url, "url", site=_DATABASE).strip() or None
