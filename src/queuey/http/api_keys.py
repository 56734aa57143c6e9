"""API keys: ``Authorization: ApiKey <key>`` or ``X-Api-Key: <key>``.

Keys are configured by the SHA-256 digest of the key, never the key itself; a presented key is
hashed and compared with every stored digest in constant time (``hmac.compare_digest``).
The principal a key acts as carries a grant: a fingerprint of the key's whole entry (digest,
id, roles, organisation), which changes when any of them does.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from queuey.http.auth import InvalidCredentialsError, Principal
from queuey.http.config import ApiKeyConfig

__all__ = ["ApiKeyTable", "api_key_digest", "key_grant"]


def api_key_digest(key: str) -> str:
    """The lowercase hex SHA-256 digest of ``key`` (UTF-8), as ``sha256`` in the config wants."""
    return hashlib.sha256(key.encode()).hexdigest()


def key_grant(entry: ApiKeyConfig) -> str:
    """The fingerprint (hex) of ``entry``: its digest, id, roles and organisation."""
    parts = ["apikey", entry.sha256, entry.id, *sorted(entry.roles), "|"]
    parts += [entry.org or "", entry.org_class or ""]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


class ApiKeyTable:
    """The configured API keys.

    Args:
        keys: the keys, each with its digest and the principal it acts as.
    """

    def __init__(self, keys: Iterable[ApiKeyConfig]) -> None:
        self._keys = tuple(keys)
        self.grants = frozenset(key_grant(key) for key in self._keys)
        """The grants of the configured keys."""

    def __repr__(self) -> str:
        return f"ApiKeyTable(ids={[key.id for key in self._keys]!r})"

    def __bool__(self) -> bool:
        return bool(self._keys)

    def verify(self, key: str) -> Principal:
        """Return the principal ``key`` acts as.

        Every stored digest is compared, so the time taken does not depend on which matched.

        Raises:
            InvalidCredentialsError: no configured key has this digest.
        """
        digest = api_key_digest(key).encode()
        found: ApiKeyConfig | None = None
        for entry in self._keys:
            if hmac.compare_digest(digest, entry.sha256.encode()):
                found = entry
        if found is None:
            raise InvalidCredentialsError("unknown API key")
        return Principal(found.id, found.roles, found.org, found.org_class, key_grant(found))
