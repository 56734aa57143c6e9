"""The broker URLs a backend connects to: one, or the nodes of a cluster tried in turn.

A backend is given one AMQP URL, several (a sequence, or one string of URLs separated by commas
or whitespace), and ``Brokers`` keeps them with the one in use. A connection attempt tries each
URL once, starting with the one in use; after a lost connection it starts with the next one
(the node it was on has probably gone). Passwords are never shown: every URL is redacted in
messages and logs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from queuey.backends.rabbitmq._errors import password_of, redact
from queuey.errors import ConfigError
from queuey.secrets import remember

__all__ = ["Brokers", "with_heartbeat"]

_SEPARATOR = re.compile(r"[\s,]+(?=amqps?://)")


class Brokers:
    """The URLs of one backend, in the order given, and the one in use.

    Args:
        urls: one AMQP URL, several separated by commas or whitespace, or a sequence of them.

    Raises:
        ConfigError: no URL, or one that is not ``amqp://`` / ``amqps://`` with a host (named,
            its password masked).
    """

    def __init__(self, urls: str | Sequence[str]) -> None:
        given = _SEPARATOR.split(urls.strip()) if isinstance(urls, str) else list(urls)
        if not given or not all(isinstance(url, str) and url for url in given):
            raise ConfigError("no AMQP URL given: pass one URL, or a list of the cluster's URLs")
        for url in given:
            remember(url)
            _check_url(url)
        self.urls: tuple[str, ...] = tuple(given)
        self.current = 0

    @property
    def url(self) -> str:
        """The URL in use (the last one connected to, or the first)."""
        return self.urls[self.current]

    @property
    def safe_url(self) -> str:
        """The URL in use, its password blanked."""
        return redact(self.url)

    @property
    def password(self) -> str | None:
        """The password of the URL in use, as the driver sees it."""
        return password_of(self.url)

    def described(self) -> str:
        """Every URL, redacted: the one URL, or ``"url1, url2, url3"``."""
        return ", ".join(redact(url) for url in self.urls)

    def turn(self, after_loss: bool) -> list[int]:
        """The indexes of the URLs to try, in order: from the one in use, or (``after_loss``)
        from the next one, round the list once."""
        start = (self.current + 1 if after_loss else self.current) % len(self.urls)
        return [(start + step) % len(self.urls) for step in range(len(self.urls))]


def with_heartbeat(url: str, seconds: int) -> str:
    """``url`` asking for a ``seconds`` heartbeat, unless it already names one."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "heartbeat" for key, _ in query):
        return url
    return urlunsplit(parts._replace(query=urlencode([*query, ("heartbeat", str(seconds))])))


def _check_url(url: str) -> None:
    """Refuse a URL the driver would misread, naming it (password masked).

    Raises:
        ConfigError: not ``amqp://`` or ``amqps://`` with a host.
    """
    try:
        parts = urlsplit(url)
        valid = (
            parts.scheme in ("amqp", "amqps")
            and bool(parts.hostname)
            and (parts.port is None or parts.port > 0)
        )
    except ValueError:
        valid = False
    if not valid:
        shown = redact(url) if "://" in url else "<not a URL>"
        raise ConfigError(f"AMQP URL {shown!r} is not of the form amqp://user@host:5672/vhost")
