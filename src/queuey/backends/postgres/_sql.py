"""Named SQL statements loaded from ``sql/queries.sql`` and migrations from
``sql/migrations/``, composed with the schema and table as quoted identifiers.

Identifiers are validated (``[A-Za-z_][A-Za-z0-9_]*``, at most 63 bytes) and composed with
``psycopg.sql.Identifier``; user input is never pasted into SQL text. Only ``_store.py`` runs
these statements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from psycopg import sql

from queuey.errors import ConfigError

__all__ = [
    "Migration",
    "Statements",
    "check_identifier",
    "latest_version",
    "migrations",
    "statement_texts",
]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_NAME_LINE = re.compile(r"^-- (name|part): (\w+)\s*$", re.MULTILINE)
_INDEXES = (
    "claim", "lease", "done", "expiry", "failed", "cancelled", "unique", "running", "starts",
    "starts_age", "workflow", "pace_age", "pace_tat",
)  # fmt: skip
_PER_CALL = frozenset({"listen"})  # composed with an identifier known only when run


def check_identifier(value: str, what: str) -> str:
    """Return ``value`` if it is a usable SQL identifier.

    Raises:
        ConfigError: empty, too long (> 63 bytes), or other than ASCII letters, digits, ``_``.
    """
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise ConfigError(
            f"{what}: {value!r} is not a usable identifier (ASCII letters, digits and _, "
            "not starting with a digit, at most 63 characters)"
        )
    return value


@cache
def _raw_queries() -> dict[str, str]:
    """The ``-- name:`` statements of ``queries.sql``, each ``{part}`` replaced by the code
    (comments left out) of its ``-- part:`` block: text several statements share, never run
    alone (a part may use the parts above it)."""
    return statement_texts("queries.sql")


@cache
def statement_texts(file: str) -> dict[str, str]:
    """The ``-- name:`` statements of ``sql/<file>``, each ``{part}`` replaced by the code of a
    ``-- part:`` block of ``queries.sql`` or of ``file`` (``dashboard.sql`` shares the parts of
    ``queries.sql``)."""
    statements: dict[str, str] = {}
    parts: dict[str, str] = {}
    for source in dict.fromkeys(("queries.sql", file)):
        text = resources.files(__package__).joinpath(f"sql/{source}").read_text()
        pieces = _NAME_LINE.split(text)
        for kind, name, body in zip(pieces[1::3], pieces[2::3], pieces[3::3], strict=True):
            if kind == "part":
                parts[name] = body.strip()
            elif source == file:
                statements[name] = body.strip()
    for part, body in parts.items():  # a part may use the parts defined before it
        code = "\n".join(line for line in body.splitlines() if not line.startswith("--"))
        for table in (parts, statements):
            for name, statement in table.items():
                table[name] = statement.replace(f"{{{part}}}", code)
    return statements


def _rendered(name: str, statement: sql.Composed) -> sql.SQL:
    """``statement`` rendered once, its comment lines replaced by one naming it (``-- queuey:
    claim``, what ``pg_stat_activity`` and the server log show), its lines unindented.

    psycopg renders a ``Composed`` again on every execution and caches the parsing of a
    statement's placeholders only below 4,096 bytes (the claim with its comments is ~5,900):
    sending the rendered text without comments skips both on every call. The identifiers are
    validated ASCII, so the text is the same in every client encoding.
    """
    lines = statement.as_string(None).splitlines()
    code = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("--")]
    return sql.SQL("\n".join([f"-- queuey: {name}", *code]))


@dataclass(frozen=True)
class Migration:
    """One versioned schema change."""

    version: int
    name: str
    text: str


@cache
def migrations() -> tuple[Migration, ...]:
    """Every migration, in version order."""
    folder = resources.files(__package__).joinpath("sql/migrations")
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append(Migration(version, entry.name.removesuffix(".sql"), entry.read_text()))
    return tuple(sorted(found, key=lambda m: m.version))


def latest_version() -> int:
    """The version of the newest migration: what a schema must be at for this queuey."""
    return max(m.version for m in migrations())


class Statements:
    """The statements of one (schema, table), composed once."""

    def __init__(self, schema: str, table: str) -> None:
        self.schema = check_identifier(schema, "schema")
        self.table = check_identifier(table, "table")
        self.names = {
            "schema": sql.Identifier(self.schema),
            "table": sql.Identifier(self.schema, self.table),
            "migrations": sql.Identifier(self.schema, "queuey_migrations"),
            "idempotency": sql.Identifier(self.schema, f"{self.table}_idempotency"[:63]),
            "schedules": sql.Identifier(self.schema, f"{self.table}_schedules"[:63]),
            "idempotency_age_index": sql.Identifier(f"{self.table}_idempotency_age"[:63]),
            "paused": sql.Identifier(self.schema, f"{self.table}_paused"[:63]),
            "audit": sql.Identifier(self.schema, f"{self.table}_audit"[:63]),
            "flow_starts": sql.Identifier(self.schema, f"{self.table}_flow_starts"[:63]),
            "flow_pace": sql.Identifier(self.schema, f"{self.table}_flow_pace"[:63]),
            "flow_set": sql.Identifier(self.schema, f"{self.table}_flow_set"[:63]),
            "flow_declared": sql.Identifier(self.schema, f"{self.table}_flow_declared"[:63]),
            "workflow_edges": sql.Identifier(self.schema, f"{self.table}_workflow_edges"[:63]),
            "batches": sql.Identifier(self.schema, f"{self.table}_batches"[:63]),
        }
        for index in _INDEXES:
            self.names[f"{index}_index"] = sql.Identifier(f"{self.table}_{index}"[:63])
        self.names["status_check"] = sql.Identifier(f"{self.table}_status"[:63])
        self.names["ended_function"] = sql.Identifier(self.schema, f"{self.table}_ended"[:63])
        self.names["ended_trigger"] = sql.Identifier(f"{self.table}_ended"[:63])
        self._queries = {
            name: _rendered(name, sql.SQL(body).format(**self.names))
            for name, body in _raw_queries().items()
            if name not in _PER_CALL
        }

    def __getitem__(self, name: str) -> sql.SQL:
        return self._queries[name]

    def listen(self, channel: str) -> sql.Composed:
        """The ``listen`` statement for ``channel`` (validated identifier).

        Raises:
            ConfigError: ``channel`` is not a usable identifier.
        """
        identifier = sql.Identifier(check_identifier(channel, "channel"))
        return sql.SQL(_raw_queries()["listen"]).format(channel=identifier)

    def migration(self, migration: Migration) -> sql.Composed:
        """A migration's text composed with this schema's names."""
        return sql.SQL(migration.text).format(**self.names)
