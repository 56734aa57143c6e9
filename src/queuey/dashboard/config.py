"""``DashboardConfig``: the ``[dashboard]`` TOML table, checked once.

::

    [dashboard]
    view = "role:ops"               # who may see it; the access grammar of [queues] publish
    act = "role:admin"              # who may retry, discard, pause and resume
    session_hours = 8               # how long a browser stays signed in; default 8
    secret = "${QUEUEY_DASHBOARD_SECRET}"  # signs session cookies; at least 32 bytes

``view`` and ``act`` default to ``"private"``: with ``view`` private there is no dashboard at
all (every path answers 404), with ``act`` private nobody may act. An access string that does
not parse closes its door (as ``publish`` does) and keeps a ``problem`` for the start-up
warning. Without ``secret`` each process signs with a random key of its own, so sessions end
when it restarts and are not shared between processes. Errors are ``ConfigError``s naming the
file and the key; no message contains the secret.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from queuey._validation import Site, check_float, check_str
from queuey.errors import ConfigError
from queuey.http.access import AccessPolicy

__all__ = ["DEFAULT_SESSION_HOURS", "MIN_SECRET_BYTES", "DashboardConfig"]

DEFAULT_SESSION_HOURS = 8.0
MIN_SECRET_BYTES = 32
_KEYS = ("view", "act", "session_hours", "secret")
_PRIVATE = AccessPolicy.parse("private")


@dataclass(frozen=True)
class DashboardConfig:
    """Who may see the dashboard and who may act in it.

    Attributes:
        view: who may see the pages (private: the dashboard does not exist, 404).
        act: who may act (retry, discard, pause, resume); they must also pass ``view``.
        session_hours: how long a sign-in lasts, in hours (> 0; a bearer token's own expiry
            ends it sooner).
        secret: the key signing session cookies (at least 32 bytes), or ``None`` for a random
            key per process.

    Raises:
        ConfigError: ``session_hours`` not above zero, or a secret shorter than 32 bytes.
    """

    view: AccessPolicy = _PRIVATE
    act: AccessPolicy = _PRIVATE
    session_hours: float = DEFAULT_SESSION_HOURS
    secret: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_float(self.session_hours, "session_hours", positive=True)
        if self.secret is not None and len(self.secret.encode()) < MIN_SECRET_BYTES:
            raise ConfigError(f"secret must be at least {MIN_SECRET_BYTES} bytes long")

    @property
    def enabled(self) -> bool:
        """Whether the dashboard exists (``view`` is not private)."""
        return not self.view.is_private

    @classmethod
    def from_table(
        cls, table: Mapping[str, Any] | None, path: str | os.PathLike[str]
    ) -> DashboardConfig:
        """Build the configuration from the ``[dashboard]`` table (``None``: absent).

        Args:
            table: the table as ``tomllib`` returns it, environment variables expanded.
            path: the file it came from, named in error messages.

        Raises:
            ConfigError: not a table, an unknown key, a value of the wrong type, a
                non-positive ``session_hours`` or a short ``secret``; the message names the
                file and the key (e.g. ``app.toml: dashboard.secret must be ...``).
        """
        site = Site("dashboard", os.fspath(path))
        if table is None:
            return cls()
        if not isinstance(table, Mapping):
            raise ConfigError(f"{site.file}: [dashboard] must be a table")
        for key in table:
            if key not in _KEYS:
                raise site.error(key, f"is not a known key (expected one of {', '.join(_KEYS)})")
        secret = table.get("secret")
        if secret is not None:
            secret = check_str(secret, "secret", site=site)
            if len(secret.encode()) < MIN_SECRET_BYTES:
                raise site.error("secret", f"must be at least {MIN_SECRET_BYTES} bytes long")
        return cls(
            view=AccessPolicy.parse(check_str(table.get("view", "private"), "view", site=site)),
            act=AccessPolicy.parse(check_str(table.get("act", "private"), "act", site=site)),
            session_hours=check_float(
                table.get("session_hours", DEFAULT_SESSION_HOURS),
                "session_hours",
                positive=True,
                site=site,
            ),
            secret=secret,
        )
