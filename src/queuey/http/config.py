"""``HttpConfig``: the ``[http]`` TOML table, checked once.

::

    [http]
    base = "/api"                 # routes live under it; default "" (the app's root)
    max_body_bytes = 1048576      # 413 above this; default 1 MiB
    header_timeout_secs = 10      # 408 when a request's headers take longer; default 10
    body_timeout_secs = 30        # 408 when its body takes longer after them; default 30

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
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from queuey._validation import Site, check_float, check_int, check_str
from queuey.errors import ConfigError
from queuey.http.bearer import MIN_SECRET_BYTES, load_public_key
from queuey.http.deadlines import DEFAULT_BODY_SECS, DEFAULT_HEADER_SECS

__all__ = ["DEFAULT_MAX_BODY_BYTES", "ApiKeyConfig", "HttpConfig", "JwtConfig"]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
_T = TypeVar("_T")
_BASE = re.compile(r"(/[^/{}?#\s]+)*")
_DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class JwtConfig:
    """How bearer tokens are verified: exactly one of ``secret`` and ``public_key``.

    Attributes:
        audience: the ``aud`` every token must carry.
        secret: the HS256 shared secret (at least 32 bytes), or ``None``.
        public_key: the RS256 public key in PEM, or ``None``.

    Raises:
        ConfigError: an empty audience, neither or both keys, a short secret, or a public key
            that is not an RSA key in PEM (the message never contains the secret).
    """

    audience: str
    secret: str | None = field(default=None, repr=False)
    public_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not check_str(self.audience, "audience").strip():
            raise ConfigError("audience: is required (the `aud` tokens must carry)")
        _optional_str(self.secret, "secret")
        _optional_str(self.public_key, "public_key")
        if (self.secret is None) == (self.public_key is None):
            raise ConfigError("secret: give exactly one of `secret` (HS256) and `public_key`")
        if self.secret is not None and len(self.secret.encode()) < MIN_SECRET_BYTES:
            raise ConfigError(f"secret: must be at least {MIN_SECRET_BYTES} bytes long")
        if self.public_key is not None:
            try:
                load_public_key(self.public_key)
            except ValueError as exc:
                raise ConfigError(f"public_key: {exc}") from None


@dataclass(frozen=True)
class ApiKeyConfig:
    """One API key, stored as the SHA-256 digest of the key.

    Attributes:
        id: the principal id the key acts as.
        sha256: the lowercase hex SHA-256 digest of the key (see ``api_key_digest``).
        roles: the roles the key holds.
        org: the organisation the key acts in, or ``None``.
        org_class: that organisation's class, or ``None``.

    Raises:
        ConfigError: an empty id, a digest that is not 64 lowercase hex digits, an empty role,
            or ``org_class`` without ``org``.
    """

    id: str
    sha256: str = field(repr=False)
    roles: frozenset[str] = frozenset()
    org: str | None = None
    org_class: str | None = None

    def __post_init__(self) -> None:
        if not check_str(self.id, "id").strip():
            raise ConfigError("id: is required")
        if not _DIGEST.fullmatch(check_str(self.sha256, "sha256")):
            raise ConfigError("sha256: expected the key's SHA-256 digest as 64 hex digits")
        if isinstance(self.roles, str) or not isinstance(self.roles, Collection):
            raise ConfigError(f"roles: expected a set of strings, got {type(self.roles).__name__}")
        object.__setattr__(self, "roles", frozenset(self.roles))
        if not all(check_str(role, "roles").strip() for role in self.roles):
            raise ConfigError("roles: must not contain an empty string")
        for name, value in (("org", self.org), ("org_class", self.org_class)):
            text = _optional_str(value, name)
            if text is not None and not text.strip():
                raise ConfigError(f"{name}: must not be empty")
        if self.org_class is not None and self.org is None:
            raise ConfigError("org_class: needs `org` (the organisation it is the class of)")


@dataclass(frozen=True)
class HttpConfig:
    """The HTTP endpoint's settings.

    Attributes:
        base: the path prefix of every route, ``""`` (the default) or ``"/seg[/seg...]"``
            without a trailing slash; ``POST {base}/queues/{topic}``.
        max_body_bytes: the largest accepted request body in bytes (413 above it).
        header_timeout_secs: how long a request's headers may take to arrive, in seconds,
            when ``queuey serve``, ``queuey dashboard`` or ``queuey run --http`` serves it
            (408 and the connection closed past it).
        body_timeout_secs: how long its body may take after the headers, in seconds (408).
        jwt: how bearer tokens are verified, or ``None`` to accept none.
        api_keys: the accepted API keys (ids and digests unique).

    Raises:
        ConfigError: a malformed base, a limit below 1, a timeout not above 0, or two keys
            sharing an id or digest.
    """

    base: str = ""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    header_timeout_secs: float = DEFAULT_HEADER_SECS
    body_timeout_secs: float = DEFAULT_BODY_SECS
    jwt: JwtConfig | None = None
    api_keys: tuple[ApiKeyConfig, ...] = ()

    def __post_init__(self) -> None:
        if not _BASE.fullmatch(check_str(self.base, "base")):
            message = "is not a path such as '/api' (no braces, spaces or trailing slash)"
            raise ConfigError(f"base: {self.base!r} {message}")
        check_int(self.max_body_bytes, "max_body_bytes", low=1)
        for key in ("header_timeout_secs", "body_timeout_secs"):
            object.__setattr__(self, key, check_float(getattr(self, key), key, positive=True))
        if self.jwt is not None and not isinstance(self.jwt, JwtConfig):
            raise ConfigError(f"jwt: expected a JwtConfig, got {type(self.jwt).__name__}")
        if not isinstance(self.api_keys, tuple | list) or not all(
            isinstance(key, ApiKeyConfig) for key in self.api_keys
        ):
            raise ConfigError("api_keys: expected a tuple of ApiKeyConfig")
        object.__setattr__(self, "api_keys", tuple(self.api_keys))
        for attribute in ("id", "sha256"):
            seen = [getattr(key, attribute) for key in self.api_keys]
            if len(set(seen)) != len(seen):
                raise ConfigError(f"api_keys: two keys share one `{attribute}`")

    @classmethod
    def from_table(cls, table: Mapping[str, Any], path: str | os.PathLike[str]) -> HttpConfig:
        """Build the configuration from the ``[http]`` table.

        Args:
            table: the ``[http]`` table as ``tomllib`` returns it (environment expanded).
            path: the file the table came from, named in error messages.

        Returns:
            The checked configuration; ``base`` loses any trailing slash (``"/"`` is ``""``).

        Raises:
            ConfigError: an unknown key, a wrong type or a bad value; the message names the file
                and the key, e.g. ``app.toml: [http.jwt] secret: must be at least 32 bytes``.
        """
        reader = _Reader(table, "[http]", os.fspath(path))
        reader.only(
            "base", "max_body_bytes", "header_timeout_secs", "body_timeout_secs", "jwt", "api_keys"
        )
        jwt_table = reader.optional_table("jwt")
        base = reader.string("base")
        return reader.build(
            cls,
            base="" if base is None else base.rstrip("/"),
            max_body_bytes=reader.table.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES),
            header_timeout_secs=reader.table.get("header_timeout_secs", DEFAULT_HEADER_SECS),
            body_timeout_secs=reader.table.get("body_timeout_secs", DEFAULT_BODY_SECS),
            jwt=None if jwt_table is None else _jwt(reader.nested(jwt_table, "[http.jwt]")),
            api_keys=_api_keys(reader),
        )


class _Reader:
    """Typed access to one TOML table, with errors that name the key and the file."""

    def __init__(self, table: Mapping[str, Any], where: str, path: str) -> None:
        self.site = Site.section(where, path)
        if not isinstance(table, Mapping):
            raise self.site.about("expected a table")
        self.table, self.path = table, path

    def nested(self, table: Mapping[str, Any], where: str) -> _Reader:
        return _Reader(table, where, self.path)

    def error(self, key: str, message: str) -> ConfigError:
        return self.site.error(key, message)

    def build(self, factory: Callable[..., _T], **values: Any) -> _T:
        """``factory(**values)``, its ``ConfigError`` located in this table and file."""
        with self.site.context():
            return factory(**values)

    def only(self, *keys: str) -> None:
        for key in self.table:
            if key not in keys:
                raise self.error(key, f"unknown key (expected one of {', '.join(keys)})")

    def string(self, key: str) -> str | None:
        value = self.table.get(key)
        return None if value is None else check_str(value, key, site=self.site)

    def strings(self, key: str) -> list[str]:
        value = self.table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.error(key, "expected a list of strings")
        return value

    def optional_table(self, key: str) -> Mapping[str, Any] | None:
        value = self.table.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise self.error(key, f"expected a table, got {type(value).__name__}")
        return value


def _optional_str(value: object, key: str) -> str | None:
    return None if value is None else check_str(value, key)


def _jwt(reader: _Reader) -> JwtConfig:
    reader.only("secret", "public_key", "audience")
    return reader.build(
        JwtConfig,
        audience=reader.string("audience") or "",
        secret=reader.string("secret"),
        public_key=reader.string("public_key"),
    )


def _api_keys(reader: _Reader) -> tuple[ApiKeyConfig, ...]:
    value = reader.table.get("api_keys", [])
    if not isinstance(value, list):
        raise reader.error("api_keys", "expected an array of tables ([[http.api_keys]])")
    return tuple(
        _api_key(reader.nested(item, f"[[http.api_keys]] #{number}"))
        for number, item in enumerate(value, start=1)
    )


def _api_key(reader: _Reader) -> ApiKeyConfig:
    reader.only("id", "roles", "sha256", "org", "org_class")
    return reader.build(
        ApiKeyConfig,
        id=reader.string("id") or "",
        sha256=(reader.string("sha256") or "").lower(),
        roles=frozenset(reader.strings("roles")),
        org=reader.string("org"),
        org_class=reader.string("org_class"),
    )
