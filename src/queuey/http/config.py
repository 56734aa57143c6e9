"""``HttpConfig``: the ``[http]`` TOML table, checked once.

::

    [http]
    base = "/api"                 # routes live under it; default "" (the app's root)
    max_body_bytes = 1048576      # 413 above this; default 1 MiB

    [http.jwt]                    # bearer tokens (optional)
    secret = "${QUEUEY_JWT_SECRET}"   # HS256, at least 32 bytes; or public_key = PEM (RS256)
    audience = "queuey"           # required: tokens must carry this `aud`

    [[http.api_keys]]             # API keys (optional, any number)
    id = "ops-bot"                # recorded as published_by
    roles = ["ops"]
    sha256 = "<hex digest of the key>"
    org = "acme"                  # optional
    org_class = "staff"           # optional, needs org

Environment variables are expanded by the TOML loader before the table arrives here. Any
unknown key or wrong type is a ``ConfigError`` naming the key and the file; no message ever
contains a secret.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from queuey.errors import ConfigError
from queuey.http.bearer import MIN_SECRET_BYTES, load_public_key

__all__ = ["DEFAULT_MAX_BODY_BYTES", "ApiKeyConfig", "HttpConfig", "JwtConfig"]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
_BASE = re.compile(r"(/[^/{}?#\s]+)*")
_DIGEST = re.compile(r"[0-9a-fA-F]{64}")


@dataclass(frozen=True)
class JwtConfig:
    """How bearer tokens are verified: exactly one of ``secret`` and ``public_key``.

    Attributes:
        audience: the ``aud`` every token must carry.
        secret: the HS256 shared secret (at least 32 bytes), or ``None``.
        public_key: the RS256 public key in PEM, or ``None``.
    """

    audience: str
    secret: str | None = field(default=None, repr=False)
    public_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ApiKeyConfig:
    """One API key, stored as the SHA-256 digest of the key.

    Attributes:
        id: the principal id the key acts as.
        sha256: the lowercase hex SHA-256 digest of the key.
        roles: the roles the key holds.
        org: the organisation the key acts in, or ``None``.
        org_class: that organisation's class, or ``None``.
    """

    id: str
    sha256: str = field(repr=False)
    roles: frozenset[str] = frozenset()
    org: str | None = None
    org_class: str | None = None


@dataclass(frozen=True)
class HttpConfig:
    """The HTTP endpoint's settings.

    Attributes:
        base: the path prefix of every route, ``""`` (the default) or ``"/seg[/seg...]"``
            without a trailing slash; ``POST {base}/queues/{topic}``.
        max_body_bytes: the largest accepted request body in bytes (413 above it).
        jwt: how bearer tokens are verified, or ``None`` to accept none.
        api_keys: the accepted API keys.
    """

    base: str = ""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    jwt: JwtConfig | None = None
    api_keys: tuple[ApiKeyConfig, ...] = ()

    @classmethod
    def from_table(cls, table: Mapping[str, Any], path: str | os.PathLike[str]) -> HttpConfig:
        """Build the configuration from the ``[http]`` table.

        Args:
            table: the ``[http]`` table as ``tomllib`` returns it (environment expanded).
            path: the file the table came from, named in error messages.

        Returns:
            The checked configuration.

        Raises:
            ConfigError: an unknown key, a wrong type or a bad value; the message names the key
                and the file.
        """
        reader = _Reader(table, "[http]", os.fspath(path))
        reader.only("base", "max_body_bytes", "jwt", "api_keys")
        jwt_table = reader.optional_table("jwt")
        return cls(
            base=_base(reader),
            max_body_bytes=_max_body_bytes(reader),
            jwt=None if jwt_table is None else _jwt(reader.nested(jwt_table, "[http.jwt]")),
            api_keys=_api_keys(reader),
        )


class _Reader:
    """Typed access to one TOML table, with errors that name the key and the file."""

    def __init__(self, table: Mapping[str, Any], where: str, path: str) -> None:
        if not isinstance(table, Mapping):
            raise ConfigError(f"{path}: {where}: expected a table")
        self.table, self.where, self.path = table, where, path

    def nested(self, table: Mapping[str, Any], where: str) -> _Reader:
        return _Reader(table, where, self.path)

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.path}: {self.where} {key}: {message}")

    def only(self, *keys: str) -> None:
        for key in self.table:
            if key not in keys:
                raise self.error(key, f"unknown key (expected one of {', '.join(keys)})")

    def string(self, key: str) -> str | None:
        value = self.table.get(key)
        if value is not None and not isinstance(value, str):
            raise self.error(key, f"expected a string, got {type(value).__name__}")
        return value

    def name(self, key: str) -> str | None:
        value = self.string(key)
        if value is not None and not value.strip():
            raise self.error(key, "must not be empty")
        return value

    def strings(self, key: str) -> list[str]:
        value = self.table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.error(key, "expected a list of strings")
        if not all(item.strip() for item in value):
            raise self.error(key, "must not contain an empty string")
        return value

    def optional_table(self, key: str) -> Mapping[str, Any] | None:
        value = self.table.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise self.error(key, f"expected a table, got {type(value).__name__}")
        return value


def _base(reader: _Reader) -> str:
    base = (reader.string("base") or "").rstrip("/")
    if not _BASE.fullmatch(base):
        raise reader.error("base", f"{base!r} is not a path such as '/api' (no braces or spaces)")
    return base


def _max_body_bytes(reader: _Reader) -> int:
    value = reader.table.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise reader.error("max_body_bytes", f"expected an integer >= 1, got {value!r}")
    return value


def _jwt(reader: _Reader) -> JwtConfig:
    reader.only("secret", "public_key", "audience")
    secret, public_key, audience = (
        reader.string("secret"),
        reader.string("public_key"),
        reader.name("audience"),
    )
    if audience is None:
        raise reader.error("audience", "is required (the `aud` tokens must carry)")
    if (secret is None) == (public_key is None):
        raise reader.error("secret", "give exactly one of `secret` (HS256) and `public_key`")
    if secret is not None and len(secret.encode()) < MIN_SECRET_BYTES:
        raise reader.error("secret", f"must be at least {MIN_SECRET_BYTES} bytes long")
    if public_key is not None:
        try:
            load_public_key(public_key)
        except ValueError as exc:
            raise reader.error("public_key", str(exc)) from None
    return JwtConfig(audience=audience, secret=secret, public_key=public_key)


def _api_keys(reader: _Reader) -> tuple[ApiKeyConfig, ...]:
    value = reader.table.get("api_keys", [])
    if not isinstance(value, list):
        raise reader.error("api_keys", "expected an array of tables ([[http.api_keys]])")
    keys = tuple(
        _api_key(reader.nested(item, f"[[http.api_keys]] #{number}"))
        for number, item in enumerate(value, start=1)
    )
    for attribute in ("id", "sha256"):
        seen = [getattr(key, attribute) for key in keys]
        if len(set(seen)) != len(seen):
            raise reader.error("api_keys", f"two keys share one `{attribute}`")
    return keys


def _api_key(reader: _Reader) -> ApiKeyConfig:
    reader.only("id", "roles", "sha256", "org", "org_class")
    key_id, digest = reader.name("id"), reader.string("sha256")
    if key_id is None:
        raise reader.error("id", "is required")
    if digest is None or not _DIGEST.fullmatch(digest):
        raise reader.error("sha256", "expected the key's SHA-256 digest as 64 hex digits")
    org, org_class = reader.name("org"), reader.name("org_class")
    if org_class is not None and org is None:
        raise reader.error("org_class", "needs `org` (the organisation it is the class of)")
    return ApiKeyConfig(
        id=key_id,
        sha256=digest.lower(),
        roles=frozenset(reader.strings("roles")),
        org=org,
        org_class=org_class,
    )
